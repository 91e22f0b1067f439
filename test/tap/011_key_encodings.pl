# What a printable key is in databases that are not UTF8 (test/regress/sql/key_printable.sql
# has UTF8): single-byte encodings apply the Unicode rule to the character
# each byte stands for (LATIN1: C1 controls 0x80-0x9F and the soft hyphen
# 0xAD anywhere, no-break space 0xA0 not at either end; WIN1252: 0x80 is the
# euro sign, 0x81 stands for nothing), SQL_ASCII the ASCII rule with every
# byte above 0x7F accepted, EUC_JP the ASCII rule and the ideographic space
# not at either end.  Text input, the cast, make_key and binary input agree.

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('encodings');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;

my $dir = PostgreSQL::Test::Utils::tempdir;

# try_key(hex): "ok", or the SQLSTATE and DETAIL, through text input, the
# cast from text and make_key (whose key is "p:<value>:o:v1:<checksum>")
my $helper = q{
CREATE EXTENSION idempotency;
CREATE FUNCTION try_key(hex text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	t text := convert_from(decode(hex, 'hex'), getdatabaseencoding());
	k idempotency.key;
	r1 text := 'ok'; r2 text := 'ok';
	state text; detail text;
BEGIN
	BEGIN
		k := idempotency.key_in(t::cstring);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
		r1 := state || ' ' || detail;
	END;
	BEGIN
		k := t::idempotency.key;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
		r2 := state || ' ' || detail;
	END;
	IF r1 <> r2 THEN
		RETURN 'text input and cast disagree: ' || r1 || ' / ' || r2;
	END IF;
	IF r1 = 'ok' AND encode(idempotency.key_send(k), 'hex') <> hex THEN
		RETURN 'key_send differs';
	END IF;
	RETURN r1;
END $$;
CREATE FUNCTION try_make_key(hex text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	state text; detail text;
BEGIN
	PERFORM idempotency.make_key('p', convert_from(decode(hex, 'hex'), getdatabaseencoding()), 'o');
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
	RETURN state || ' ' || detail;
END $$;
CREATE TABLE keys (k idempotency.key);
};

# binary_copy(file, bytes): a binary COPY file of one row, one field
sub binary_copy
{
	my ($file, $bytes) = @_;
	open(my $fh, '>:raw', $file) or die "could not write $file: $!";
	print $fh "PGCOPY\n\377\r\n\0", pack('NN', 0, 0);
	print $fh pack('nN', 1, length $bytes), $bytes;
	print $fh pack('n', 0xffff);
	close($fh);
}

my $n = 0;

# check(db, hex, expected): every way in gives the expected verdict; an
# expected detail is matched as a regular expression
sub check
{
	my ($db, $hex, $expected, $what) = @_;
	my $re = $expected eq 'ok' ? qr/^ok$/ : qr/^22P02 An idempotency key must not \Q$expected\E$/;

	like($node->safe_psql($db, "SELECT try_key('$hex')"), $re, "$db: $what: text input and cast");

	# make_key puts the value after "p:", two characters on, where white
	# space is inside the key
	my $mk = $expected;
	$mk =~ s/at position (\d+)\./'at position ' . ($1 + 2) . '.'/e;
	my $mkre = ($mk eq 'ok' || $mk =~ /white space/) ? qr/^ok$/ : qr/^22P02 An idempotency key must not \Q$mk\E$/;
	like($node->safe_psql($db, "SELECT try_make_key('$hex')"), $mkre, "$db: $what: make_key");

	# binary input, in the database's own encoding
	my $file = "$dir/key" . $n++ . '.bin';
	binary_copy($file, pack('H*', $hex));
	my ($ret, $out, $err) = $node->psql($db,
		"SET client_encoding = '" . ($db eq 'sql_ascii' ? 'SQL_ASCII' : uc $db) . "';"
		  . " COPY keys FROM '$file' (FORMAT binary)");
	if ($expected eq 'ok')
	{
		is($ret, 0, "$db: $what: binary input accepts it");
	}
	else
	{
		like($err, qr/DETAIL:  An idempotency key must not \Q$expected\E/, "$db: $what: binary input refuses it");
	}
}

# LATIN1
$node->safe_psql('postgres',
	q{CREATE DATABASE latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('latin1', $helper);
check('latin1', '618562', 'contain control characters: byte 0x85 at position 2.', 'C1 control 0x85');
check('latin1', '80', 'contain control characters: byte 0x80 at position 1.', 'C1 control 0x80');
check('latin1', '61629f', 'contain control characters: byte 0x9F at position 3.', 'C1 control 0x9F');
check('latin1', '61ad62', 'contain format characters: byte 0xAD at position 2.', 'soft hyphen');
check('latin1', 'a06162', 'begin or end with white space: byte 0xA0 at position 1.', 'leading no-break space');
check('latin1', '6162a0', 'begin or end with white space: byte 0xA0 at position 3.', 'trailing no-break space');
check('latin1', '61a062', 'ok', 'inner no-break space');
check('latin1', 'e96ce97665', 'ok', 'letters above 0x9F');
check('latin1', 'a1bfd7f7ff', 'ok', 'symbols above 0xA0');
check('latin1', '610962', 'contain control characters: U+0009 at position 2.', 'tab');
check('latin1', '206162', 'begin or end with white space: U+0020 at position 1.', 'leading space');

# every byte from 0x80 to 0xFF, alone and inside a key
my %latin1;
$latin1{$_} = 'control' for 0x80 .. 0x9f;
$latin1{0xa0} = 'space';
$latin1{0xad} = 'format';
my $verdicts = $node->safe_psql('latin1', q{
	SELECT string_agg(to_hex(b) || ' ' || (try_key(to_hex(b)) = 'ok') || ' '
					  || (try_key('61' || to_hex(b) || '62') = 'ok'), ',' ORDER BY b)
	  FROM generate_series(128, 255) AS b});
my @bad_alone;
my @bad_inside;
for (split /,/, $verdicts)
{
	my ($hex, $alone, $inside) = split / /;
	my $want = $latin1{hex $hex} // 'printable';
	push @bad_alone, "0x$hex" if ($want eq 'printable') != ($alone eq 'true');
	push @bad_inside, "0x$hex" if ($want eq 'printable' || $want eq 'space') != ($inside eq 'true');
}
is("@bad_alone", '', 'latin1: a key of one byte is accepted exactly for the printable bytes');
is("@bad_inside", '', 'latin1: inside a key, exactly the C1 controls and the soft hyphen are refused');

# WIN1252: 0x80-0x9F are mostly printable characters there
$node->safe_psql('postgres',
	q{CREATE DATABASE win1252 ENCODING 'WIN1252' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('win1252', $helper);
check('win1252', '618062', 'ok', 'euro sign 0x80');
check('win1252', '619f62', 'ok', 'Y with diaeresis 0x9F');
check('win1252', '618162',
	'contain bytes that stand for no character in encoding "WIN1252": byte 0x81 at position 2.', 'unmapped 0x81');
check('win1252', '61ad62', 'contain format characters: byte 0xAD at position 2.', 'soft hyphen');
check('win1252', 'a061', 'begin or end with white space: byte 0xA0 at position 1.', 'leading no-break space');

# SQL_ASCII: bytes above 0x7F are not characters of any set, all accepted
$node->safe_psql('postgres',
	q{CREATE DATABASE sql_ascii ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('sql_ascii', $helper);
check('sql_ascii', '618562', 'ok', 'byte 0x85');
check('sql_ascii', 'a0', 'ok', 'a lone 0xA0');
check('sql_ascii', 'e280ae', 'ok', 'the UTF-8 bytes of U+202E');
check('sql_ascii', '61097f', 'contain control characters: U+0009 at position 2.', 'tab');
check('sql_ascii', '617f', 'contain control characters: U+007F at position 2.', 'DEL');
check('sql_ascii', '6120', 'begin or end with white space: U+0020 at position 2.', 'trailing space');

# EUC_JP: ASCII rules, and the ideographic space 0xA1A1 is white space
$node->safe_psql('postgres',
	q{CREATE DATABASE euc_jp ENCODING 'EUC_JP' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
$node->safe_psql('euc_jp', $helper);
check('euc_jp', 'a4a2a1a1a4a4', 'ok', 'inner ideographic space');
check('euc_jp', 'a1a1a4a2', 'begin or end with white space: U+3000 at position 1.', 'leading ideographic space');
check('euc_jp', 'a4a2a4a4a1a1', 'begin or end with white space: U+3000 at position 3.', 'trailing ideographic space');
check('euc_jp', 'a4a209', 'contain control characters: U+0009 at position 2.', 'tab after a kana');

# the message shows the value with refused bytes escaped
my ($ret, $out, $err) = $node->psql('latin1',
	q{SET client_encoding = 'UTF8'; SELECT convert_from('\x618562', 'LATIN1')::idempotency.key});
like($err, qr/invalid input syntax for type idempotency\.key: "a\\x85b"/, 'latin1: the message escapes the C1 byte');

$node->stop;
done_testing();
