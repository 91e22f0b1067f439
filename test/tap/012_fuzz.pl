# A fuzzer for everything that parses untrusted input: the key's text input
# and binary input (key_recv), make_key, parse_key and define_state_machine
# (with transition_allowed reading what it stored).  Random and adversarial
# inputs (random bytes, every encoding edge, NUL bytes, broken UTF-8, keys
# around 255 bytes, huge and deeply nested JSON, machines at and past their
# limits) are generated from a fixed seed, run through the server in UTF8,
# LATIN1 and SQL_ASCII databases, and checked against a model written here
# independently of the C code:
#
# - the server never crashes, and every error has an expected SQLSTATE;
# - a key is accepted exactly when the model says so, and refused with the
#   model's reason, character and position; text input, the cast and binary
#   input agree; text output, key_send and binary COPY round-trip;
# - parse_key(make_key(...)) gives back the parts, with checksum_ok, and the
#   checksum is SHA-256 as computed here; parse_key finds exactly the
#   structured keys, and checksum_ok is right;
# - define_state_machine accepts exactly the definitions the model accepts,
#   with the SQLSTATE of the first problem otherwise, and transition_allowed
#   then answers as the model does for every transition and for non-edges.
#
# IDEMPOTENCY_FUZZ_SEED picks another seed, IDEMPOTENCY_FUZZ_SCALE runs
# more cases (1 by default: well under a minute).

use strict;
use warnings FATAL => 'all';

use Digest::SHA qw(sha256_hex);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $seed = $ENV{IDEMPOTENCY_FUZZ_SEED} // 20260711;
my $scale = $ENV{IDEMPOTENCY_FUZZ_SCALE} // 1;
diag("fuzz seed $seed, scale $scale (IDEMPOTENCY_FUZZ_SEED and IDEMPOTENCY_FUZZ_SCALE change them)");
srand($seed);
my $started = time();

my $node = PostgreSQL::Test::Cluster->new('fuzz');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
my $dir = PostgreSQL::Test::Utils::tempdir;

#
# Random helpers
#

sub rnd { return int(rand($_[0])); }
sub pick { return $_[ rnd(scalar @_) ]; }
sub chance { return rand() < $_[0]; }

# code points worth hitting: every class's edges
my @special_cp = (
	0x00, 0x01, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x21, 0x3A, 0x5C, 0x22, 0x7E, 0x7F,
	0x80, 0x85, 0x9F, 0xA0, 0xA1, 0xAD, 0xAE, 0xFF, 0x100, 0x300, 0x34F, 0x378,
	0x5FF, 0x600, 0x605, 0x606, 0x61C, 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, 0x1680,
	0x180E, 0x1FFF, 0x2000 .. 0x2010, 0x2027 .. 0x2030, 0x205F .. 0x2070, 0x2800,
	0x2FFF, 0x3000, 0x3001, 0x3164, 0xD7FF, 0xE000, 0xF8FF, 0xFDCF, 0xFDD0, 0xFDEF,
	0xFDF0, 0xFE0F, 0xFEFF, 0xFFF8 .. 0xFFFF, 0x10000, 0x110BD, 0x110CD, 0x13430,
	0x13438, 0x13439, 0x1343F, 0x13440, 0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A,
	0x1F642, 0x1FFFE, 0x1FFFF, 0xE0000, 0xE0001, 0xE0002, 0xE0020, 0xE007F,
	0xE0080, 0xEFFFF, 0xF0000, 0x10FFFD, 0x10FFFE, 0x10FFFF);

sub random_cp
{
	my $r = rand();
	return pick(@special_cp) if $r < 0.25;
	return 0x21 + rnd(0x5e) if $r < 0.6;
	return 0xA0 + rnd(0x700) if $r < 0.72;
	return 0x2000 + rnd(0x80) if $r < 0.82;
	my $cp;
	do { $cp = rnd(0x110000) } while ($cp >= 0xD800 && $cp <= 0xDFFF);
	return $cp;
}

# UTF-8 bytes of code points (surrogates never reach here)
sub utf8 { return join '', map { my $c = chr($_); utf8::encode($c); $c } @_; }

sub ascii_word { return join '', map { chr(0x21 + rnd(0x5e)) } 1 .. (1 + rnd($_[0] // 12)); }

#
# The model of a key: what is printable, written from doc/key-type.md's rule
#

# class of a Unicode code point, from Perl's own Unicode database (plus the
# format characters Unicode 15 added after Perl's version)
sub cp_class
{
	my ($cp) = @_;
	my $c = chr($cp);
	return 'control' if $c =~ /\p{Cc}/;
	return 'format' if $c =~ /\p{Cf}/ || ($cp >= 0x13439 && $cp <= 0x1343F);
	return 'separator' if $c =~ /[\p{Zl}\p{Zp}]/;
	return 'noncharacter' if $c =~ /\p{Noncharacter_Code_Point}/;
	return 'space' if $c =~ /\p{Zs}/;
	return 'printable';
}

# decode UTF-8 as RFC 3629 (and PostgreSQL) define it; undef if invalid
sub decode_utf8
{
	my ($bytes) = @_;
	my @cps;
	while (length $bytes)
	{
		if ($bytes =~ s/^([\x00-\x7F])//) { push @cps, ord $1; }
		elsif ($bytes =~ s/^([\xC2-\xDF])([\x80-\xBF])//)
		{
			push @cps, ((ord($1) & 0x1F) << 6) | (ord($2) & 0x3F);
		}
		elsif ($bytes =~ s/^(\xE0[\xA0-\xBF]|[\xE1-\xEC\xEE\xEF][\x80-\xBF]|\xED[\x80-\x9F])([\x80-\xBF])//)
		{
			my @b = map { ord } split //, $1 . $2;
			push @cps, (($b[0] & 0x0F) << 12) | (($b[1] & 0x3F) << 6) | ($b[2] & 0x3F);
		}
		elsif ($bytes =~ s/^(\xF0[\x90-\xBF]|[\xF1-\xF3][\x80-\xBF]|\xF4[\x80-\x8F])([\x80-\xBF])([\x80-\xBF])//)
		{
			my @b = map { ord } split //, $1 . $2 . $3;
			push @cps, (($b[0] & 0x07) << 18) | (($b[1] & 0x3F) << 12) | (($b[2] & 0x3F) << 6) | ($b[3] & 0x3F);
		}
		else { return undef; }
	}
	return \@cps;
}

# key_model(encoding, bytes): 'enc' (refused before the key type sees it),
# 'ok', or "22P02 <reason> <character> <position>"
sub key_model
{
	my ($enc, $bytes) = @_;
	my (@cps, @names);

	return 'enc' if index($bytes, "\0") >= 0;
	if ($enc eq 'UTF8')
	{
		my $cps = decode_utf8($bytes);
		return 'enc' unless defined $cps;
		@cps = @$cps;
		@names = map { sprintf('U+%04X', $_) } @cps;
	}
	else
	{
		@cps = map { ord } split //, $bytes;
		@names = map { $_ < 0x80 ? sprintf('U+%04X', $_) : sprintf('byte 0x%02X', $_) } @cps;
		# SQL_ASCII: no character set above 0x7F
		@cps = map { $_ < 0x80 ? $_ : 0x41 } @cps if $enc eq 'SQL_ASCII';
	}
	return '22P02 empty' if length($bytes) == 0;
	return '22P02 long' if length($bytes) > 255;
	for my $i (0 .. $#cps)
	{
		my $class = cp_class($cps[$i]);
		next if $class eq 'printable';
		next if $class eq 'space' && $i > 0 && $i < $#cps;
		return "22P02 $class $names[$i] " . ($i + 1);
	}
	return 'ok';
}

# the server's verdict in the model's terms
my %reasons = (
	'contain control characters' => 'control',
	'contain format characters' => 'format',
	'contain line or paragraph separators' => 'separator',
	'contain noncharacters' => 'noncharacter',
	'begin or end with white space' => 'space');

sub server_verdict
{
	my ($state, $detail) = @_;
	return 'enc' if $state =~ /^enc:22021$/;
	return $state if $state eq 'ok' || $state ne '22P02';
	return '22P02 empty' if $detail eq 'An idempotency key must not be empty.';
	return '22P02 long' if $detail =~ /^An idempotency key must be at most 255 bytes long/;
	return "22P02 $reasons{$1} $2 $3"
	  if $detail =~ /^An idempotency key must not (.+): (U\+[0-9A-F]{4,6}|byte 0x[0-9A-F]{2}) at position (\d+)\.$/
	  && exists $reasons{$1};
	return "22P02 unexpected detail: $detail";
}

#
# Random keys, per encoding
#

sub random_key_bytes
{
	my ($enc) = @_;
	my $kind = rnd(8);

	if ($enc ne 'UTF8')
	{
		# single bytes, weighted to the C1 range, NBSP, soft hyphen, space
		my @weighted = (0x20, 0x7F, 0x80 .. 0xA0, 0xAD, 0x09, 0x00);
		my $len = $kind == 0 ? 250 + rnd(10) : rnd(20);
		return join '', map {
			chr(chance(0.3) ? pick(@weighted) : chance(0.5) ? 0x21 + rnd(0x5e) : 1 + rnd(255))
		} 1 .. $len;
	}
	return utf8(map { random_cp() } 1 .. rnd(40)) if $kind == 0;
	if ($kind == 1)
	{
		# one special character somewhere, often at an end
		my $word = ascii_word(10);
		my $pos = pick(0, length $word, rnd(length($word) + 1));
		return substr($word, 0, $pos) . utf8(pick(@special_cp)) . substr($word, $pos);
	}
	return join('', map { chr(rnd(256)) } 1 .. rnd(30)) if $kind == 2;
	if ($kind == 3)
	{
		# broken UTF-8
		my $s = utf8(map { random_cp() } 1 .. 1 + rnd(10));
		my $bad = pick("\x80", "\xC0\xAF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
			"\xFE", "\xFF", "\xC2", "\xE2\x80", "\xF0\x9F\x99", "\xF8\x88\x80\x80\x80");
		my $pos = rnd(length($s) + 1);
		return substr($s, 0, $pos) . $bad . substr($s, $pos);
	}
	if ($kind == 4)
	{
		# around the 255-byte limit, with characters of every width
		my $target = 253 + rnd(5);
		my $s = '';
		$s .= utf8(pick(0x41, 0xE9, 0x4E2D, 0x1F642, 0x20, 0xA0)) while length($s) < $target;
		return $s;
	}
	if ($kind == 5)
	{
		my $s = ascii_word(10);
		my $pos = rnd(length($s) + 1);
		return substr($s, 0, $pos) . "\0" . substr($s, $pos);
	}
	if ($kind == 6)
	{
		# white space of every kind at the ends and inside
		my @zs = (0x20, 0xA0, 0x1680, 0x2000 .. 0x200A, 0x202F, 0x205F, 0x3000);
		return utf8(chance(0.5) ? pick(@zs) : ()) . ascii_word(5) . utf8(pick(@zs)) . ascii_word(5)
		  . utf8(chance(0.5) ? pick(@zs) : ());
	}
	return ascii_word(30);
}

sub hex_of { return unpack('H*', $_[0]); }

# write rows of columns as a CSV file the server reads with COPY; byte
# strings as bytea hex, undef as NULL
sub csv_file
{
	my ($name, @rows) = @_;
	my $file = "$dir/$name.csv";
	open(my $fh, '>:raw', $file) or die "could not write $file: $!";
	for my $row (@rows)
	{
		print $fh join(',', map { !defined $_ ? '' : /^\d+$/ ? $_ : '"\\x' . hex_of($_) . '"' } @$row), "\n";
	}
	close($fh);
	return $file;
}

# binary_copy(file, fields): a binary COPY file of one row (a field is bytes,
# or undef for NULL)
sub binary_copy
{
	my ($file, @fields) = @_;
	open(my $fh, '>:raw', $file) or die "could not write $file: $!";
	print $fh "PGCOPY\n\377\r\n\0", pack('NN', 0, 0);
	print $fh pack('n', scalar @fields);
	print $fh defined $_ ? pack('N', length $_) . $_ : pack('N', 0xFFFFFFFF) for @fields;
	print $fh pack('n', 0xffff);
	close($fh);
}

my $harness = q{
CREATE EXTENSION idempotency;
CREATE TABLE fuzz_key (id int PRIMARY KEY, payload bytea NOT NULL);
CREATE TABLE fuzz_ok (id int PRIMARY KEY, k idempotency.key NOT NULL);
CREATE TABLE fuzz_recv (k idempotency.key);
CREATE TABLE fuzz_back (id int, k idempotency.key);

-- text input: the cast and key_in must agree, and round-trip
CREATE FUNCTION fuzz_keys() RETURNS TABLE (id int, verdict text, detail text, agree bool, trip bool)
LANGUAGE plpgsql AS $$
DECLARE
	c record; t text; k1 idempotency.key; k2 idempotency.key;
	s2 text; d2 text;
BEGIN
	FOR c IN SELECT * FROM fuzz_key ORDER BY 1 LOOP
		id := c.id; detail := NULL; agree := NULL; trip := NULL;
		BEGIN
			t := convert_from(c.payload, getdatabaseencoding());
		EXCEPTION WHEN OTHERS THEN
			verdict := 'enc:' || SQLSTATE;
			RETURN NEXT;
			CONTINUE;
		END;
		verdict := 'ok'; s2 := 'ok'; d2 := NULL;
		BEGIN
			k1 := t::idempotency.key;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS verdict = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
		END;
		BEGIN
			k2 := idempotency.key_in(t::cstring);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS s2 = RETURNED_SQLSTATE, d2 = PG_EXCEPTION_DETAIL;
		END;
		agree := verdict = s2 AND detail IS NOT DISTINCT FROM d2;
		IF verdict = 'ok' THEN
			trip := k1::text = t AND idempotency.key_out(k1)::text = t
				AND idempotency.key_send(k1) = c.payload
				AND k1 OPERATOR(pg_catalog.=) k2
				AND idempotency.key_hash(k1) = idempotency.key_hash(k2);
			INSERT INTO fuzz_ok VALUES (c.id, k1);
		END IF;
		RETURN NEXT;
	END LOOP;
END $$;

-- binary input: one COPY per file
CREATE FUNCTION fuzz_binary(path text, n int) RETURNS TABLE (id int, verdict text, detail text, got text)
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. n LOOP
		id := i; detail := NULL; got := NULL;
		BEGIN
			EXECUTE format('COPY fuzz_recv FROM %L (FORMAT binary)', path || '/' || i || '.bin');
			verdict := 'ok';
			SELECT coalesce(encode(idempotency.key_send(r.k), 'hex'), 'NULL') INTO got FROM fuzz_recv AS r;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS verdict = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
		END;
		DELETE FROM fuzz_recv;
		RETURN NEXT;
	END LOOP;
END $$;

-- make_key, and parse_key of what it made
CREATE TABLE fuzz_mk (id int PRIMARY KEY, a bytea, b bytea, c bytea, d bytea);
CREATE FUNCTION fuzz_make_keys() RETURNS TABLE (id int, verdict text, detail text, key text, parsed bool)
LANGUAGE plpgsql AS $$
DECLARE
	r record; p text[]; k idempotency.key; x record; enc name := getdatabaseencoding();
BEGIN
	FOR r IN SELECT * FROM fuzz_mk ORDER BY 1 LOOP
		id := r.id; detail := NULL; key := NULL; parsed := NULL;
		BEGIN
			p := ARRAY[convert_from(r.a, enc), convert_from(r.b, enc), convert_from(r.c, enc), convert_from(r.d, enc)];
		EXCEPTION WHEN OTHERS THEN
			verdict := 'enc:' || SQLSTATE;
			RETURN NEXT;
			CONTINUE;
		END;
		BEGIN
			k := idempotency.make_key(p[1], p[2], p[3], p[4]);
			verdict := 'ok';
			key := encode(idempotency.key_send(k), 'hex');
			SELECT * INTO x FROM idempotency.parse_key(k);
			parsed := FOUND AND x.prefix = p[1] AND x.business_id = p[2] AND x.operation = p[3]
				AND x.version = p[4] AND x.checksum_ok
				AND k::text = array_to_string(p, ':') || ':' || x.checksum;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS verdict = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
		END;
		RETURN NEXT;
	END LOOP;
END $$;

-- parse_key of any key
CREATE TABLE fuzz_pk (id int PRIMARY KEY, payload bytea NOT NULL);
CREATE FUNCTION fuzz_parse_keys() RETURNS TABLE (id int, verdict text, nrows int, joined bool, checksum_ok bool)
LANGUAGE plpgsql AS $$
DECLARE
	r record; t text; k idempotency.key; x record; enc name := getdatabaseencoding();
BEGIN
	FOR r IN SELECT * FROM fuzz_pk ORDER BY 1 LOOP
		id := r.id; nrows := NULL; joined := NULL; checksum_ok := NULL;
		BEGIN
			t := convert_from(r.payload, enc);
			k := t::idempotency.key;
		EXCEPTION WHEN OTHERS THEN
			verdict := 'key:' || SQLSTATE;
			RETURN NEXT;
			CONTINUE;
		END;
		verdict := 'ok';
		nrows := (SELECT count(*) FROM idempotency.parse_key(k));
		SELECT * INTO x FROM idempotency.parse_key(k);
		IF FOUND THEN
			joined := concat_ws(':', x.prefix, x.business_id, x.operation, x.version, x.checksum) = t;
			checksum_ok := x.checksum_ok;
		END IF;
		RETURN NEXT;
	END LOOP;
END $$;
};

# run(db, sql): the rows of a query, as arrays of columns
sub run
{
	my ($db, $sql) = @_;
	my $out = $node->safe_psql($db, $sql);
	return map { [ split /\|/, $_, -1 ] } grep { length } split /\n/, $out;
}

my %database = (UTF8 => 'fuzz_utf8', LATIN1 => 'fuzz_latin1', SQL_ASCII => 'fuzz_sql_ascii');
for my $enc (sort keys %database)
{
	$node->safe_psql('postgres',
		"CREATE DATABASE $database{$enc} ENCODING '$enc' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
	$node->safe_psql($database{$enc}, $harness);
}

#
# Keys: text input, binary input, round trips
#

for my $enc (sort keys %database)
{
	my $db = $database{$enc};
	my $n = ($enc eq 'UTF8' ? 2000 : 800) * $scale;
	my @cases = map { random_key_bytes($enc) } 1 .. $n;
	# the loader's ends: NUL alone and every single byte
	push @cases, "\0", map { chr } 1 .. 255;
	my $file = csv_file("keys_$enc", map { [ $_ + 1, $cases[$_] ] } 0 .. $#cases);
	$node->safe_psql($db, "COPY fuzz_key FROM '$file' (FORMAT csv)");

	my (@wrong, @disagree, @trip, @states);
	my %seen;
	for my $row (run($db, "SET client_encoding = '$enc'; SELECT * FROM fuzz_keys()"))
	{
		my ($id, $verdict, $detail, $agree, $trip) = @$row;
		my $bytes = $cases[ $id - 1 ];
		my $want = key_model($enc, $bytes);
		my $got = server_verdict($verdict, $detail);
		$seen{ $verdict =~ s/^enc://r }++;
		push @wrong, sprintf('#%d %s: model %s, server %s', $id, hex_of($bytes), $want, $got) if $want ne $got;
		push @disagree, "#$id" if $agree ne '' && $agree ne 't';
		push @trip, "#$id" if $verdict eq 'ok' && $trip ne 't';
		push @states, "#$id $verdict" unless $verdict =~ /^(ok|22P02|enc:22021)$/;
	}
	is(scalar(@wrong), 0, "$enc: text input accepts and refuses exactly as the model (seed $seed)")
	  or diag(join "\n", @wrong[ 0 .. ($#wrong < 20 ? $#wrong : 19) ]);
	is("@states", '', "$enc: only 22P02 and 22021 as errors");
	is("@disagree", '', "$enc: the cast and text input agree");
	is("@trip", '', "$enc: accepted keys round-trip through text output and key_send");
	note("$enc: " . join(', ', map { "$_: $seen{$_}" } sort keys %seen));

	# binary input of every fourth case, and malformed files
	my @binary = grep { $_ % 4 == 0 } 0 .. $#cases;
	my $i = 0;
	mkdir "$dir/bin_$enc";
	binary_copy("$dir/bin_$enc/" . ++$i . '.bin', $cases[$_]) for @binary;
	my $wellformed = $i;
	for (1 .. 40)
	{
		my $k = ascii_word(10);
		my $path = "$dir/bin_$enc/" . ++$i . '.bin';
		my $kind = $_ % 5;
		if ($kind == 0) { binary_copy($path, $k, $k); }
		elsif ($kind == 1) { binary_copy($path, undef); }
		else
		{
			binary_copy($path, $k);
			open(my $fh, '<:raw', $path) or die;
			my $content = do { local $/; <$fh> };
			close($fh);
			$content = substr($content, 0, rnd(length $content)) if $kind == 2;
			substr($content, 19 + rnd(length($content) - 19), 1) = chr(rnd(256)) if $kind == 3;
			$content = pick("PGCOPY\n", '') . substr($content, 11) if $kind == 4;
			open($fh, '>:raw', $path) or die;
			print $fh $content;
			close($fh);
		}
	}
	my (@bwrong, @bstates);
	for my $row (run($db, "SET client_encoding = '$enc'; SELECT * FROM fuzz_binary('$dir/bin_$enc', $i)"))
	{
		my ($id, $verdict, $detail, $got) = @$row;
		if ($id <= $wellformed)
		{
			my $bytes = $cases[ $binary[ $id - 1 ] ];
			my $want = key_model($enc, $bytes);
			my $v = server_verdict($verdict eq '22021' ? 'enc:22021' : $verdict, $detail);
			push @bwrong, sprintf('#%d %s: model %s, server %s', $id, hex_of($bytes), $want, $v) if $want ne $v;
			push @bwrong, "#$id: read back as $got" if $verdict eq 'ok' && $got ne hex_of($bytes);
		}
		else
		{
			# 54000: a length field too large for a buffer
			push @bstates, "#$id $verdict" unless $verdict =~ /^(ok|22P02|22P04|22021|54000)$/;
		}
	}
	is(scalar(@bwrong), 0, "$enc: binary input accepts and refuses exactly as text input (seed $seed)")
	  or diag(join "\n", @bwrong[ 0 .. ($#bwrong < 20 ? $#bwrong : 19) ]);
	is("@bstates", '', "$enc: malformed binary COPY data gives 22P04, 54000 or a key error, nothing else");

	# binary output read back by binary input
	is( $node->safe_psql($db, qq{
			SET client_encoding = '$enc';
			COPY (SELECT id, k FROM fuzz_ok) TO '$dir/out_$enc.bin' (FORMAT binary);
			COPY fuzz_back FROM '$dir/out_$enc.bin' (FORMAT binary);
			SELECT count(*) FROM fuzz_ok AS o FULL JOIN fuzz_back AS b USING (id)
			 WHERE b.k IS NULL OR o.k IS NULL OR idempotency.key_send(o.k) <> idempotency.key_send(b.k)}),
		'0', "$enc: every accepted key round-trips through binary COPY");
}

#
# make_key and parse_key
#

sub random_part
{
	my ($enc) = @_;
	my $r = rand();
	return '' if $r < 0.04;
	return ascii_word(8) . ':' . ascii_word(3) if $r < 0.08;
	return ascii_word(100) x 2 if $r < 0.12;
	return random_key_bytes($enc) if $r < 0.3;
	return ascii_word(chance(0.5) ? 4 : 20) =~ s/:/-/gr;
}

my @part_names = qw(prefix business_id operation version);

# the model of make_key: the first empty part or part with ':' (22023),
# else the key's own rule on prefix:business_id:operation:version:checksum
sub make_key_model
{
	my ($enc, @parts) = @_;
	return ('enc') if grep { key_model($enc, $_) eq 'enc' } grep { length } @parts;
	for my $i (0 .. 3)
	{
		return ("22023 $part_names[$i] empty") if $parts[$i] eq '';
		return ("22023 $part_names[$i] colon") if index($parts[$i], ':') >= 0;
	}
	my $raw = join ':', @parts;
	my $key = $raw . ':' . substr(sha256_hex($raw), 0, 8);
	my $v = key_model($enc, $key);
	return ($v, $key);
}

for my $enc ('UTF8', 'LATIN1')
{
	my $db = $database{$enc};
	my @cases = map { [ map { random_part($enc) } 1 .. 4 ] } 1 .. 600 * $scale;
	my $file = csv_file("mk_$enc", map { [ $_ + 1, @{ $cases[$_] } ] } 0 .. $#cases);
	$node->safe_psql($db, "COPY fuzz_mk FROM '$file' (FORMAT csv)");
	my (@wrong, @unparsed);
	my %seen;
	for my $row (run($db, "SET client_encoding = '$enc'; SELECT * FROM fuzz_make_keys()"))
	{
		my ($id, $verdict, $detail, $key, $parsed) = @$row;
		my @parts = @{ $cases[ $id - 1 ] };
		my ($want, $wantkey) = make_key_model($enc, @parts);
		$seen{$verdict}++;
		# 22023 carries its reason in the message, which fuzz_make_keys
		# does not return: compare the SQLSTATE only
		my $g = $verdict eq '22P02' ? server_verdict($verdict, $detail)
		  : $verdict =~ /^enc:/ ? 'enc' : $verdict;
		my $w = $want =~ /^22023/ ? '22023' : $want;
		push @wrong, sprintf('#%d %s: model %s, server %s', $id, join('|', map { hex_of($_) } @parts), $w, $g)
		  if $w ne $g;
		push @wrong, "#$id: key $key, model " . hex_of($wantkey) if $verdict eq 'ok' && $key ne hex_of($wantkey);
		push @unparsed, "#$id" if $verdict eq 'ok' && $parsed ne 't';
	}
	is(scalar(@wrong), 0, "$enc: make_key builds exactly the model's key and refuses as it does (seed $seed)")
	  or diag(join "\n", @wrong[ 0 .. ($#wrong < 20 ? $#wrong : 19) ]);
	is("@unparsed", '', "$enc: parse_key(make_key(...)) gives back the parts, with checksum_ok");
	note("$enc make_key: " . join(', ', map { "$_: $seen{$_}" } sort keys %seen));
}

{
	my @cases;
	for (1 .. 1000 * $scale)
	{
		my @p = map { random_part('UTF8') =~ s/:/-/gr } 1 .. (4 + rnd(3));
		my $sum = substr(sha256_hex(join ':', @p[ 0 .. 3 ]), 0, 8);
		pop @p if chance(0.1);
		my $r = rand();
		my $key = join ':', @p;
		my @four = map { $_ // 'x' } @p[ 0 .. 3 ];
		$key = join(':', @four, $sum) if $r < 0.4;
		$key = join(':', @four, uc $sum) if $r >= 0.4 && $r < 0.5;
		$key = join(':', @four, substr($sum, 0, 7) . pick('g', '0', 'f', ':', '')) if $r >= 0.5 && $r < 0.6;
		$key = join(':', @four, pick('', ':', ':x')) . $sum if $r >= 0.6 && $r < 0.7;
		push @cases, $key;
	}
	my $file = csv_file('pk', map { [ $_ + 1, $cases[$_] ] } 0 .. $#cases);
	$node->safe_psql('fuzz_utf8', "COPY fuzz_pk FROM '$file' (FORMAT csv)");
	my @wrong;
	my $rows = 0;
	for my $row (run('fuzz_utf8', 'SELECT * FROM fuzz_parse_keys()'))
	{
		my ($id, $verdict, $nrows, $joined, $checksum_ok) = @$row;
		my $key = $cases[ $id - 1 ];
		my $valid = key_model('UTF8', $key) eq 'ok';
		if (!$valid)
		{
			push @wrong, "#$id: not a key by the model, but $verdict" if $verdict eq 'ok';
			next;
		}
		my @p = split /:/, $key, -1;
		my $structured = @p == 5 && !grep({ $_ eq '' } @p) && $p[4] =~ /^[0-9A-Fa-f]{8}$/;
		my $right = $structured && $p[4] eq substr(sha256_hex(join ':', @p[ 0 .. 3 ]), 0, 8);
		$rows += $nrows;
		push @wrong, "#$id " . hex_of($key) . ": model " . ($structured ? 1 : 0) . " rows, server $nrows"
		  if $nrows != ($structured ? 1 : 0);
		push @wrong, "#$id: parts do not join back into the key" if $structured && $joined ne 't';
		push @wrong, "#$id: checksum_ok $checksum_ok, model " . ($right ? 't' : 'f')
		  if $structured && $checksum_ok ne ($right ? 't' : 'f');
	}
	is(scalar(@wrong), 0, "parse_key finds exactly the structured keys, and checksum_ok is right (seed $seed)")
	  or diag(join "\n", @wrong[ 0 .. ($#wrong < 20 ? $#wrong : 19) ]);
	note("parse_key: $rows structured keys among " . scalar(@cases));
}

#
# State machines
#

# a JSON string for a byte string that is valid UTF-8
sub json_string
{
	my ($bytes) = @_;
	my $cps = decode_utf8($bytes) // die;
	my $out = '"';
	for my $cp (@$cps)
	{
		if ($cp == 0x22 || $cp == 0x5C) { $out .= '\\' . chr($cp); }
		elsif ($cp < 0x20 || (chance(0.1) && $cp > 0x7F && $cp < 0x10000)) { $out .= sprintf('\\u%04x', $cp); }
		elsif (chance(0.05) && $cp >= 0x10000)
		{
			my $v = $cp - 0x10000;
			$out .= sprintf('\\u%04x\\u%04x', 0xD800 + ($v >> 10), 0xDC00 + ($v & 0x3FF));
		}
		else { $out .= utf8($cp); }
	}
	return $out . '"';
}

# a state name: often one seen before; in a faulty definition sometimes
# empty or too long
sub random_state_name
{
	my ($pool, $faulty) = @_;
	my $r = rand();
	return pick(@$pool) if @$pool && $r < 0.55;
	if ($faulty)
	{
		return '' if $r < 0.58;
		return 'n' x pick(255, 256) if $r < 0.6;
		return utf8(0xE9) x pick(127, 128) if $r < 0.61;
	}
	my $name = $r < 0.75 ? utf8(map { random_cp() } 1 .. 1 + rnd(6)) : ascii_word(8);
	$name =~ s/\0//g;
	$name = 'x' if $name eq '';
	$name = 'n' x 255 if chance(0.01);
	push @$pool, $name;
	return $name;
}

# JSON values that are not strings (as array elements) and not arrays (as
# the value of a state)
sub random_json_element { return pick('1', '-2.5e3', 'null', 'true', 'false', '{}', '{"a": "b"}', '[]', '[["a"]]'); }
sub random_json_value { return pick('1', 'null', 'true', '{}', '{"a": ["b"]}', '"a"', '""'); }

# a definition as JSON text, and what the model needs to know about it; a
# third of them are faulty in some way
sub random_machine
{
	my @pool;
	my $faulty = chance(0.35);
	if ($faulty)
	{
		my $r = rand();
		return ('[]', { kind => 'other' }) if $r < 0.05;
		return ('"a"', { kind => 'other' }) if $r < 0.08;
		return ('{}', { kind => 'other' }) if $r < 0.12;
	}
	my $nkeys = 1 + rnd(chance(0.1) ? 60 : 6);
	my (%keys, @pairs, %states);
	for (1 .. $nkeys)
	{
		my $key = random_state_name(\@pool, $faulty);
		next if $keys{$key}++;
		$states{$key} = 1;
		my $value;
		if (!$faulty || chance(0.93))
		{
			my @elems;
			for (1 .. rnd(chance(0.1) ? 40 : 5))
			{
				if (!$faulty || chance(0.95))
				{
					my $name = random_state_name(\@pool, $faulty);
					$states{$name} = 1;
					push @elems, [ 'string', $name ];
				}
				else { push @elems, [ 'other', random_json_element() ]; }
			}
			$value = [ 'array', \@elems ];
		}
		else { $value = [ 'other', random_json_value() ]; }
		push @pairs, [ $key, $value ];
	}
	my $json = '{' . join(', ', map {
		my ($key, $value) = @$_;
		json_string($key) . ': '
		  . ($value->[0] eq 'array'
			? '[' . join(', ', map { $_->[0] eq 'string' ? json_string($_->[1]) : $_->[1] } @{ $value->[1] }) . ']'
			: $value->[1])
	} @pairs) . '}';
	my $initial;
	my @states = sort keys %states;
	my $r = rand();
	if ($r < 0.5) { $initial = undef; }
	elsif ($faulty && $r < 0.6) { $initial = pick([], [ 'a', undef ], [ 'no such state' ]); }
	else { $initial = [ map { pick(@states) } 1 .. 1 + rnd(3) ]; }
	return ($json, { kind => 'object', pairs => \@pairs, initial => $initial });
}

# the model of define_state_machine: the SQLSTATE of the first problem, or
# 'ok' with the states, transitions and initial states
sub machine_model
{
	my ($name, $m) = @_;
	return ('22023') if !defined $name || $name eq '' || length($name) > 63;
	return ('22023') if $m->{kind} ne 'object' || !@{ $m->{pairs} };
	my (%index, @states, @edges, %incoming);
	my $add = sub {
		my ($s) = @_;
		return '22023' if length($s) > 255;
		return undef if exists $index{$s};
		return '54000' if @states == 10000;
		$index{$s} = scalar @states;
		push @states, $s;
		return undef;
	};
	# jsonb keeps an object's keys ordered by length, then bytes
	for my $pair (sort { length($a->[0]) <=> length($b->[0]) or $a->[0] cmp $b->[0] } @{ $m->{pairs} })
	{
		my ($key, $value) = @$pair;
		return ('22023') if $key eq '';
		my $e = $add->($key);
		return ($e) if $e;
		return ('22023') if $value->[0] ne 'array';
		for my $elem (@{ $value->[1] })
		{
			return ('22023') if $elem->[0] ne 'string' || $elem->[1] eq '';
			$e = $add->($elem->[1]);
			return ($e) if $e;
			return ('54000') if @edges == 100000;
			push @edges, [ $key, $elem->[1] ];
			$incoming{ $elem->[1] } = 1;
		}
	}
	my @initial;
	if (!defined $m->{initial})
	{
		@initial = grep { !$incoming{$_} } @states;
		return ('22023') unless @initial;
	}
	else
	{
		return ('22023') if !@{ $m->{initial} } || grep { !defined } @{ $m->{initial} };
		return ('22023') if grep { !exists $index{$_} } @{ $m->{initial} };
		@initial = @{ $m->{initial} };
	}
	return ('ok', \@states, \@edges, \@initial);
}

{
	my (@cases, @csv, @pairs);
	for my $id (1 .. 400 * $scale)
	{
		my ($json, $m) = random_machine();
		my $name = "fz$id";
		$name = pick('', undef, 'm' x 63, 'm' x 64, utf8(0x1F642) x 16, utf8(0x1F642) x 15 . 'abc')
		  if chance(0.05);
		my ($want, $states, $edges, $initial) = machine_model($name, $m);
		push @cases, [ $name, $want, $initial ];
		push @csv, [ $id, $name, $json,
			defined $m->{initial}
			? '[' . join(',', map { defined $_ ? json_string($_) : 'null' } @{ $m->{initial} }) . ']'
			: undef ];
		next unless $want eq 'ok';
		# every transition, staying put, non-edges and unknown states
		my %edge = map { ("$_->[0]\0$_->[1]" => 1) } @$edges;
		push @pairs, [ $id, $_->[0], $_->[1], 1 ] for @$edges;
		for (1 .. 10)
		{
			my ($f, $t) = (pick(@$states), pick(@$states, 'no such state'));
			my $allowed = $f eq $t || $edge{"$f\0$t"} ? 1 : 0;
			push @pairs, [ $id, $f, $t, $allowed ];
		}
	}
	my $file = csv_file('sm', @csv);
	my $pfile = csv_file('sm_pairs', @pairs);
	$node->safe_psql('fuzz_utf8', qq{
		CREATE TABLE fuzz_sm (id int PRIMARY KEY, name bytea, def bytea, initial bytea);
		CREATE TABLE fuzz_sm_pairs (id int, f bytea, t bytea, allowed int);
		COPY fuzz_sm FROM '$file' (FORMAT csv);
		COPY fuzz_sm_pairs FROM '$pfile' (FORMAT csv);
	});
	my @rows = run('fuzz_utf8', q{
		CREATE FUNCTION pg_temp.fuzz_define() RETURNS TABLE (id int, verdict text, initial text, wrong int)
		LANGUAGE plpgsql AS $$
		DECLARE
			r record; n text; j jsonb; i text[];
		BEGIN
			FOR r IN SELECT * FROM fuzz_sm ORDER BY 1 LOOP
				id := r.id; initial := NULL; wrong := NULL;
				BEGIN
					n := convert_from(r.name, 'UTF8');
					j := convert_from(r.def, 'UTF8')::jsonb;
					i := (SELECT array_agg(e ORDER BY o) FROM jsonb_array_elements_text(convert_from(r.initial, 'UTF8')::jsonb) WITH ORDINALITY AS a(e, o));
					IF r.initial IS NOT NULL AND i IS NULL THEN
						i := '{}';
					END IF;
				EXCEPTION WHEN OTHERS THEN
					verdict := 'json:' || SQLSTATE;
					RETURN NEXT;
					CONTINUE;
				END;
				BEGIN
					PERFORM idempotency.define_state_machine(n, j, i);
					verdict := 'ok';
					initial := (SELECT string_agg(encode(convert_to(s, 'UTF8'), 'hex'), ',' ORDER BY o)
								  FROM idempotency.state_machines AS m, unnest(m.initial) WITH ORDINALITY AS u(s, o)
								 WHERE m.name = n);
					wrong := (SELECT count(*) FROM fuzz_sm_pairs AS p
							   WHERE p.id = r.id
								 AND idempotency.transition_allowed(n, convert_from(p.f, 'UTF8'), convert_from(p.t, 'UTF8'))
									 IS DISTINCT FROM (p.allowed = 1));
				EXCEPTION WHEN OTHERS THEN
					verdict := SQLSTATE;
				END;
				RETURN NEXT;
			END LOOP;
		END $$;
		SELECT * FROM pg_temp.fuzz_define();
	});
	my (@wrong, %seen);
	for my $row (@rows)
	{
		my ($id, $verdict, $initial, $wrong) = @$row;
		my ($name, $want, $winitial) = @{ $cases[ $id - 1 ] };
		$seen{$verdict}++;
		next if $verdict eq 'json:22P05';    # "\u0000" cannot be in jsonb
		push @wrong, "#$id: model $want, server $verdict" if $want ne $verdict;
		next unless $verdict eq 'ok' && $want eq 'ok';
		my $wi = join ',', map { hex_of($_) } @$winitial;
		push @wrong, "#$id: initial states $initial, model $wi" if $initial ne $wi;
		push @wrong, "#$id: transition_allowed is wrong for $wrong pairs" if $wrong ne '0';
	}
	is(scalar(@wrong), 0, "define_state_machine accepts exactly the model's definitions, and transition_allowed agrees (seed $seed)")
	  or diag(join "\n", @wrong[ 0 .. ($#wrong < 20 ? $#wrong : 19) ]);
	note('define_state_machine: ' . join(', ', map { "$_: $seen{$_}" } sort keys %seen));
}

# adversarial definitions built by the server: at and past the limits, huge,
# deeply nested
my @big = (
	[ 'chain of 10000 states', q{(SELECT jsonb_object_agg('s' || i, jsonb_build_array('s' || (i + 1))) FROM generate_series(1, 9999) AS i)}, 'ok' ],
	[ '10001 states', q{(SELECT jsonb_object_agg('s' || i, jsonb_build_array('s' || (i + 1))) FROM generate_series(1, 10000) AS i)}, '54000' ],
	[ '10001 keys', q{(SELECT jsonb_object_agg('s' || i, '[]'::jsonb) FROM generate_series(1, 10001) AS i)}, '54000' ],
	[ '100000 transitions', q{(SELECT jsonb_object_agg('s' || i, (SELECT jsonb_agg('s' || ((i + j) % 10000 + 1)) FROM generate_series(1, 10) AS j)) FROM generate_series(1, 10000) AS i), '{s1}'}, 'ok' ],
	[ '100000 transitions and no initial state', q{(SELECT jsonb_object_agg('s' || i, (SELECT jsonb_agg('s' || ((i + j) % 10000 + 1)) FROM generate_series(1, 10) AS j)) FROM generate_series(1, 10000) AS i)}, '22023' ],
	[ '100000 copies of one transition', q{jsonb_build_object('a', (SELECT jsonb_agg('b'::text) FROM generate_series(1, 100000)))}, 'ok' ],
	[ '100001 copies of one transition', q{jsonb_build_object('a', (SELECT jsonb_agg('b'::text) FROM generate_series(1, 100001)))}, '54000' ],
	[ 'a 20 MB key', q{jsonb_build_object(repeat('k', 20000000), '[]'::jsonb)}, '22023' ],
	[ 'a 20 MB value', q{jsonb_build_object('a', repeat('v', 20000000))}, '22023' ],
	[ 'a 20 MB target', q{jsonb_build_object('a', jsonb_build_array(repeat('v', 20000000)))}, '22023' ],
	[ 'nesting 5000 deep', q{jsonb_build_object('a', (repeat('[', 5000) || repeat(']', 5000))::jsonb)}, '22023' ],
	[ 'nesting 5000 deep as the definition', q{(repeat('[', 5000) || repeat(']', 5000))::jsonb}, '22023' ],
	[ 'nesting a million deep', q{(repeat('[', 1000000) || repeat(']', 1000000))::jsonb}, '54001' ],
	[ 'a 5 MB definition of long names', q{(SELECT jsonb_object_agg(repeat('n', 240) || i, jsonb_build_array(repeat('n', 240) || (i + 1))) FROM generate_series(1, 9999) AS i)}, 'ok' ],
);
for my $case (@big)
{
	my ($what, $expr, $want) = @$case;
	my ($ret, $out, $err) = $node->psql('fuzz_utf8', qq{
		DO \$\$
		BEGIN
			PERFORM idempotency.define_state_machine('big', $expr);
			RAISE NOTICE 'verdict ok %', idempotency.transition_allowed('big', 's1', 's2');
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE 'verdict %', SQLSTATE;
		END \$\$;});
	my ($got) = $err =~ /verdict (\w+)/;
	is($got // "no verdict: $err", $want, "define_state_machine: $what");
}

# transition_allowed with names of every kind: a boolean or 42704, nothing else
{
	my @names = ('fz1', 'fz2', 'big', '', 'm' x 63, 'm' x 64, 'x' x 10000, utf8(0x1F642) x 20);
	my @states = ('s1', 's2', '', 'n' x 300, utf8(0x202E), 'a');
	my $values = join ",\n", map {
		my $n = $_;
		map {
			my $s = $_;
			'(' . join(', ', map { "convert_from('\\x" . hex_of($_) . "', 'UTF8')" } $n, $s, pick(@states)) . ')'
		} @states
	} @names;
	my $out = $node->safe_psql('fuzz_utf8', qq{
		CREATE FUNCTION pg_temp.try_allowed(m text, f text, t text) RETURNS text LANGUAGE plpgsql AS \$\$
		BEGIN
			RETURN idempotency.transition_allowed(m, f, t)::text;
		EXCEPTION WHEN OTHERS THEN
			RETURN SQLSTATE;
		END \$\$;
		SELECT string_agg(DISTINCT pg_temp.try_allowed(m, f, t), ',') FROM (VALUES $values) AS v(m, f, t);});
	like($out, qr/^((true|false|42704),?)+$/, 'transition_allowed answers a boolean or 42704');
}

# nothing crashed
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is up');
ok(!$node->log_contains('terminated by signal|was terminated by exception|TRAP:|PANIC:'),
	'no server process crashed or failed an assertion');

note(sprintf('fuzzing took %.1f s', time() - $started));
$node->stop;
done_testing();
