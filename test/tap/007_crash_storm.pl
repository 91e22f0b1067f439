# Crash storm: several clients retry a bounded set of keys, in transactional
# and in external-work mode, while the test terminates their sessions, kills
# a backend with SIGKILL (the postmaster then restarts every process) and
# stops the server in immediate mode.  Afterwards it checks, from the
# database and from what the clients logged:
#
#   - no key of the transactional mode has two business effects, and every
#     effect a client saw committed is there;
#   - every answer a client saw acknowledged replays identically;
#   - no fencing token (attempt) was issued twice for a key, and a token
#     issued after another one for the same key is greater;
#   - no finish or abandon with a stale token was accepted, and a completed
#     external key stores the answer of the last token issued for it;
#   - nothing is stuck: once every lease has passed, every key executes or
#     replays.
#
# The workload includes every way a claim ends: finish, a stored failure, a
# transaction that rolls back, abandon, a worker that never comes back
# (take-over once its lease has run out), a worker slower than its lease (it
# must be fenced), and expiry with the background cleanup removing expired
# records.
#
# With IDEMPOTENCY_EDITION=portable (test/tap/052_portable_crash_storm.pl)
# the storm runs against the portable edition: installed by the database's
# owner, who is not a superuser, on a server that never loads the library;
# its expiry is a client of the storm's own calling idempotency.cleanup()
# twice a second, as a scheduler would, through the crashes.
#
# No assertion depends on timing.  The clients log, for every statement, when
# they sent it and when its answer arrived (on a monotonic clock); an order
# between two events is used only when those windows prove it (one answer
# arrived before the other statement was sent).  Where the storm waits, it
# waits for the clients' progress or for the server's log.  Attempts are
# compared only with each other, never with fixed numbers, so the checks
# hold for any fencing scheme whose tokens only grow per key.

use strict;
use warnings FATAL => 'all';

use Cwd ();
use File::Basename ();
use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep clock_gettime CLOCK_MONOTONIC);

$| = 1;

my $started = clock_gettime(CLOCK_MONOTONIC);

my $edition = $ENV{IDEMPOTENCY_EDITION} // 'c';
my $node = PostgreSQL::Test::Cluster->new("storm_$edition");
$node->init;
$node->append_conf('postgresql.conf', $edition eq 'c' ? qq{
shared_preload_libraries = 'idempotency'
idempotency.cleanup_interval = '1s'
} : '');
$node->append_conf('postgresql.conf', qq{
restart_after_crash = on
max_connections = 40
});
$node->start;
if ($edition eq 'portable')
{
	my $script = `make -s -C '@{[ Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../..') ]}' portable | tail -n 1`;
	chomp $script;
	$node->safe_psql('postgres', q{
		CREATE ROLE storm_owner LOGIN;
		ALTER DATABASE postgres OWNER TO storm_owner;
	});
	my ($rc, $out, $err) = $node->psql('postgres', undef,
		extra_params => [ '-U', 'storm_owner', '--single-transaction', '-v', 'ON_ERROR_STOP=1', '-f', $script ]);
	die "the portable edition did not install: $err" if $rc != 0;
}

# The application: a role that only got grant_usage and its two tables.
# charges is the business table of the transactional mode.  It has no unique
# constraint on key on purpose: a second execution of a key must show up as a
# second row for the check below, not as an error a client would retry
# through.  effects records the external work of the other mode, with the
# token the worker held when it did it, and whether its finish was refused.
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency') if $edition eq 'c';
$node->safe_psql('postgres', 'CREATE ROLE storm_app LOGIN');
$node->safe_psql('postgres', q{SELECT idempotency.grant_usage('storm_app')},
	extra_params => $edition eq 'c' ? [] : [ '-U', 'storm_owner' ]);
$node->safe_psql('postgres', q{
	CREATE TABLE charges (req bigint PRIMARY KEY, key text NOT NULL,
						  attempt bigint NOT NULL, worker int NOT NULL);
	CREATE TABLE effects (req bigint PRIMARY KEY, key text NOT NULL,
						  attempt bigint NOT NULL, worker int NOT NULL, fenced text);
	GRANT SELECT, INSERT ON charges TO storm_app;
	GRANT SELECT, INSERT, UPDATE ON effects TO storm_app;
});

# The keys.  tx-*: transactional mode; ext-*: external-work mode, kept for a
# day; exp-*: external-work mode with a ttl of a few seconds, so that
# completed records expire, are cleaned up and are claimed again during the
# storm.  Each worker picks its tx- and ext- keys from a window of four keys
# that moves one key forward with each of its requests in that mode: the
# workers go at about the same pace, so they meet on the same keys
# (concurrent duplicates, take-overs, retries after a crash) and every key is
# retried several times before the window leaves it.  The exp- keys are few
# and fixed.
my $n_workers = 6;
my @exp_keys = map { "exp-$_" } 1 .. 5;
my $ext_lease = '1 second';
my $exp_ttl = 2;    # seconds

my $dir = PostgreSQL::Test::Utils::tempdir();
my $stopfile = "$dir/stop";
my @psql_cmd = ($node->installed_command('psql'), '-X', '-q', '-A', '-t',
	'-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') . ' user=storm_app');

sub now_mono { return clock_gettime(CLOCK_MONOTONIC); }

#
# The clients
#

# run_psql(script): run one psql with this script; returns (status, stdout,
# sent, received).  status is 'ok', the SQLSTATE of an ERROR, 'down' when no
# connection could be made (nothing was sent), or 'lost' when the connection
# broke (what was sent may or may not have committed).
sub run_psql
{
	my ($script) = @_;
	my ($out, $err) = ('', '');

	# the script goes through a file: psql may exit before it reads its
	# standard input (no connection), and IPC::Run would die writing to it
	my $file = "$dir/script.$$.sql";
	open my $fh, '>', $file or die "could not write $file: $!";
	print $fh "\\set VERBOSITY verbose\n$script\n";
	close $fh;

	my $sent = now_mono();
	my $ok = eval {
		IPC::Run::run([ @psql_cmd, '-f', $file ], '<', '/dev/null',
			'>', \$out, '2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	};
	my $received = now_mono();
	my $status;
	if ($ok)
	{
		$status = 'ok';
	}
	elsif ($err =~ /\bERROR:\s+([0-9A-Z]{5}):/)
	{
		$status = $1;
	}
	elsif ($err =~ /could not connect|Connection refused|No such file or directory|is starting up|is shutting down|in recovery mode|not yet accepting/)
	{
		$status = 'down';
	}
	else
	{
		$status = 'lost';
	}
	return ($status, $out, $sent, $received);
}

# answer_of(jsonb text): the answer a worker stores, as "req/worker/attempt"
sub answer_of
{
	my ($json) = @_;
	return '' unless defined $json && $json =~ /"req": (\d+)/;
	my $req = $1;
	my ($worker) = $json =~ /"worker": (\d+)/;
	my ($attempt) = $json =~ /"attempt": (\d+)/;
	return "$req/$worker/$attempt";
}

sub request_of { my ($key) = @_; return qq{'{"key": "$key"}'}; }

# One request in transactional mode: begin, the charge and finish in one
# transaction.  Sometimes the transaction sleeps between its statements (so
# that kills land inside it), sometimes it rolls back at the end (a failure
# after the work: the claim must vanish with the charge), sometimes begin
# does not wait for a concurrent claim.
sub tx_request
{
	my ($log, $w, $req, $key) = @_;
	my $wait = rand() < 0.2 ? 'false' : 'true';
	my $sleep = rand() < 0.2 ? "SELECT pg_sleep(0.05);\n" : '';
	my $fail = rand() < 0.1;
	my $end = $fail ? 'ROLLBACK' : 'COMMIT';
	my $request = request_of($key);
	my ($status, $out, $sent, $received) = run_psql(qq{
BEGIN;
SELECT b.outcome, coalesce(b.attempt::text, '') AS attempt,
	   coalesce(b.response::text, '') AS response, b.outcome = 'execute' AS exec
  FROM idempotency.idempotent_begin('$key', request => $request,
									lease => '2 seconds', wait => $wait, external => true) AS b \\gset
\\echo BEGIN|:outcome|:attempt|:response
\\if :exec
$sleep
INSERT INTO public.charges (req, key, attempt, worker) VALUES ($req, '$key', :attempt, $w);
SELECT idempotency.idempotent_finish('$key',
	jsonb_build_object('req', $req, 'worker', $w, 'attempt', :attempt), attempt => :attempt);
\\endif
$end;
\\echo DONE
});
	my ($outcome, $token, $response) = ('none', '', '');
	if ($out =~ /^BEGIN\|(\w+)\|(\d*)\|(.*)$/m)
	{
		($outcome, $token, $response) = ($1, $2, $3);
	}
	my $done = $status eq 'ok' && $out =~ /^DONE$/m;
	my $result = !$done ? $status : $fail ? 'rolledback' : 'committed';
	my $answer = $outcome eq 'execute' ? "$req/$w/$token" : answer_of($response);
	print $log join("\t", 'TX', $key, $req, $outcome, $token, $sent, $received,
		$result, $answer), "\n";
	return $status;
}

# One request in external-work mode: begin commits a claim with a short
# lease, the "external effect" is recorded with the token the worker holds,
# then finish (or abandon) in a third transaction, passing that token.  Some
# workers are slower than their lease, some give up (abandon), some never
# come back.  A refused finish or abandon is recorded in effects.
sub ext_request
{
	my ($log, $w, $req, $key, $ttl) = @_;
	my $wait = rand() < 0.2 ? 'false' : 'true';
	my $request = request_of($key);
	my ($status, $out, $sent, $received) = run_psql(qq{
SELECT 'B|' || b.outcome || '|' || coalesce(b.attempt::text, '') || '|' || coalesce(b.response::text, '')
  FROM idempotency.idempotent_begin('$key', request => $request, ttl => '$ttl seconds',
									lease => '$ext_lease', wait => $wait, external => true) AS b;
});
	if ($status ne 'ok' || $out !~ /^B\|(\w+)\|(\d*)\|(.*)$/m)
	{
		print $log join("\t", 'BEGINFAIL', $key, $req, $status), "\n";
		return $status;
	}
	my ($outcome, $token, $response) = ($1, $2, $3);
	if ($outcome eq 'replay')
	{
		print $log join("\t", 'REPLAY', $key, $req, answer_of($response)), "\n";
		return $status;
	}
	if ($outcome ne 'execute')
	{
		print $log join("\t", 'INPROG', $key, $req), "\n";
		return $status;
	}
	print $log join("\t", 'CLAIM', $key, $req, $token, $sent, $received), "\n";

	# the external work
	($status) = run_psql(qq{
INSERT INTO public.effects (req, key, attempt, worker) VALUES ($req, '$key', $token, $w);
});
	print $log join("\t", 'EFFECT', $key, $req, $token, $status), "\n";
	return $status if $status ne 'ok';

	# The work takes a while.  Some workers never come back: their claim is
	# taken over once its lease has run out.  Some are slower than their
	# lease, or (exp- keys) than the record's ttl: by the time they finish,
	# another worker may hold the key, or the record may have expired and
	# been claimed again.  Some give up (abandon), some store a failure.
	my $r = rand();
	return 'ok' if $r < 0.05;
	Time::HiRes::sleep(rand(0.3));
	Time::HiRes::sleep(($ttl < 60 ? $ttl : 1) + rand(0.5)) if rand() < 0.1;
	my $verb = $r < 0.17 ? 'ABANDON' : 'FINISH';
	my $failed = $r > 0.9 ? 'true' : 'false';
	my $sql = $verb eq 'ABANDON'
	  ? "SELECT idempotency.idempotent_abandon('$key', attempt => $token);"
	  : "SELECT idempotency.idempotent_finish('$key', '{\"req\": $req, \"worker\": $w, \"attempt\": $token}', attempt => $token, failed => $failed);";
	($status, $out, $sent, $received) = run_psql($sql);
	print $log join("\t", $verb, $key, $req, $token, $sent, $received, $status,
		"$req/$w/$token"), "\n";
	if ($status =~ /^IK00[234]$/)
	{
		# fenced: the worker records that its work did not count
		my ($fstatus) = run_psql(
			"UPDATE public.effects SET fenced = '$status' WHERE req = $req;");
		print $log join("\t", 'FENCED', $key, $req, $token, $fstatus), "\n";
	}
	return $status;
}

# worker(n): requests until the stop file appears; a request that finds the
# server down is retried after a pause, for at most timeout_default seconds
sub worker
{
	my ($w) = @_;
	srand(1000 + $w);
	open my $log, '>>', "$dir/worker$w.log" or die "could not open log: $!";
	$log->autoflush(1);
	my $last_up = now_mono();
	my ($n, $n_tx, $n_ext) = (0, 0, 0);
	while (!-e $stopfile)
	{
		$n++;
		my $req = $w * 1_000_000 + $n;
		my $r = rand();
		my $status;
		if ($r < 0.4)
		{
			my $k = $n_tx++ + int(rand(4)) + 1;
			$status = tx_request($log, $w, $req, "tx-$k");
		}
		elsif ($r < 0.75)
		{
			my $k = $n_ext++ + int(rand(4)) + 1;
			$status = ext_request($log, $w, $req, "ext-$k", 24 * 3600);
		}
		else
		{
			$status = ext_request($log, $w, $req, $exp_keys[ int(rand(@exp_keys)) ], $exp_ttl);
		}
		print $log "END\t$req\t$status\n";
		if ($status eq 'down' || $status eq 'lost')
		{
			die "worker $w: the server stayed unreachable"
			  if now_mono() - $last_up > $PostgreSQL::Test::Utils::timeout_default;
			usleep(50_000);
		}
		else
		{
			$last_up = now_mono();
		}
	}
	close $log;
}

my @pids;
my $parent = $$;

# if the test dies, its clients go with it
END
{
	kill 'KILL', @pids if $$ == $parent && @pids;
}

foreach my $w (1 .. $n_workers)
{
	my $pid = fork();
	die "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		# the child must not run the parent's END blocks (they would stop
		# the node): leave through _exit
		my $ok = eval { worker($w); 1 };
		print STDERR "worker $w: $@" unless $ok;
		POSIX::_exit($ok ? 0 : 1);
	}
	push @pids, $pid;
}

# the portable edition's expiry: a scheduler's calls of cleanup(), which
# fail while the server is down and go on once it is back
if ($edition eq 'portable')
{
	my $pid = fork();
	die "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		my @cleaner = ($node->installed_command('psql'), '-X', '-q', '-A', '-t', '-d',
			$node->connstr('postgres') . ' user=storm_owner', '-c', 'SELECT idempotency.cleanup()');
		until (-e $stopfile)
		{
			eval { IPC::Run::run(\@cleaner, '<', '/dev/null', '>', \my $o, '2>', \my $e); };
			usleep(500_000);
		}
		POSIX::_exit(0);
	}
	push @pids, $pid;
}

#
# The storm
#

# requests_done: how many requests the workers have logged so far
sub requests_done
{
	my $n = 0;
	foreach my $w (1 .. $n_workers)
	{
		my $f = "$dir/worker$w.log";
		next unless -e $f;
		open my $fh, '<', $f or die "could not open $f: $!";
		while (<$fh>) { $n++ if /^END\t/; }
		close $fh;
	}
	return $n;
}

# wait_for_progress(n): wait until the workers have done n more requests
my $per_round = 60;
sub wait_for_progress
{
	my ($n) = @_;
	my $target = requests_done() + $n;
	my $deadline = now_mono() + $PostgreSQL::Test::Utils::timeout_default;
	while (requests_done() < $target)
	{
		die "the workers made no progress" if now_mono() > $deadline;
		foreach my $pid (@pids)
		{
			die "worker $pid exited during the storm"
			  if waitpid($pid, POSIX::WNOHANG()) == $pid;
		}
		usleep(100_000);
	}
}

# wait_until_up: wait until the server accepts connections again (not
# poll_query_until: it writes to psql's standard input, and psql may have
# exited already when the server refuses the connection)
sub wait_until_up
{
	my $deadline = now_mono() + $PostgreSQL::Test::Utils::timeout_default;
	until ((run_psql('SELECT 1;'))[0] eq 'ok')
	{
		die "the server did not come back" if now_mono() > $deadline;
		usleep(100_000);
	}
}

my %kills = (terminate => 0, kill9 => 0, immediate => 0);
my @victim_keys;
my @actions = qw(terminate kill9 terminate immediate terminate kill9
  terminate immediate terminate kill9 immediate terminate);
foreach my $action (@actions)
{
	wait_for_progress($per_round);
	if ($action eq 'terminate')
	{
		# every application session at this moment, in whatever it is doing
		$node->poll_query_until('postgres', q{
			SELECT count(pg_catalog.pg_terminate_backend(pid)) > 0
			  FROM pg_catalog.pg_stat_activity WHERE usename = 'storm_app'})
		  or die "no application session to terminate";
	}
	elsif ($action eq 'kill9')
	{
		# a backend in the middle of a transaction that claimed a key and
		# charged it: SIGKILL, and the postmaster restarts every process
		my $victim_req = -(scalar(@victim_keys) + 1);
		my $key = "victim$victim_req";
		push @victim_keys, $key;
		my $victim = $node->background_psql('postgres');
		my $pid = $victim->query_safe(q{SET ROLE storm_app; SELECT pg_catalog.pg_backend_pid()});
		$victim->query_safe(qq{
			BEGIN;
			SELECT idempotency.idempotent_begin('$key', external => true);
			INSERT INTO public.charges VALUES ($victim_req, '$key', 0, 0);
		});
		my $offset = -s $node->logfile;
		kill 'KILL', $pid or die "could not kill backend $pid: $!";
		$node->wait_for_log(qr/\(PID $pid\) was terminated by signal 9/, $offset);
		wait_until_up();
		eval { $victim->quit; };
	}
	else
	{
		$node->stop('immediate');
		$node->start;
	}
	$kills{$action}++;
}
wait_for_progress($per_round);

open my $stop, '>', $stopfile or die "could not create $stopfile: $!";
close $stop;
my $worker_failures = 0;
foreach my $pid (@pids)
{
	waitpid($pid, 0);
	$worker_failures++ if $? != 0;
}
is($worker_failures, 0, 'every client ran to the end');

#
# What the clients saw
#

my (%seen_key, %claims, %claim_of, @accepted, %acked, %fenced_req, %tx_log);
my ($requests, $tx_requests, $ext_requests, $replays, $refused) = (0) x 5;
my @unexpected;
foreach my $w (1 .. $n_workers)
{
	open my $fh, '<', "$dir/worker$w.log" or die "could not open log: $!";
	while (my $line = <$fh>)
	{
		chomp $line;
		my @f = split /\t/, $line, -1;
		my $type = $f[0];
		$seen_key{ $f[1] } = 1 unless $type eq 'END';
		if ($type eq 'END')
		{
			$requests++;
		}
		elsif ($type eq 'TX')
		{
			my (undef, $key, $req, $outcome, $token, $sent, $received, $result, $answer) = @f;
			$tx_requests++;
			$tx_log{$req} = { key => $key, token => $token, sent => $sent,
				received => $received, outcome => $outcome, result => $result };
			push @{ $acked{$key} }, [ $answer, "req $req (transactional $outcome)" ]
			  if ($outcome eq 'execute' && $result eq 'committed')
			  || $outcome eq 'replay';
			$replays++ if $outcome eq 'replay';
			push @unexpected, $line
			  unless $result =~ /^(committed|rolledback|lost|down)$/;
		}
		elsif ($type eq 'BEGINFAIL')
		{
			$ext_requests++;
			push @unexpected, $line unless $f[3] =~ /^(lost|down)$/;
		}
		elsif ($type eq 'INPROG')
		{
			$ext_requests++;
		}
		elsif ($type eq 'REPLAY')
		{
			$ext_requests++;
			$replays++;
			push @{ $acked{ $f[1] } }, [ $f[3], "req $f[2] (replay)" ]
			  if $f[1] =~ /^ext-/;
		}
		elsif ($type eq 'CLAIM')
		{
			$ext_requests++;
			my (undef, $key, $req, $token, $sent, $received) = @f;
			my $c = { key => $key, req => $req, token => $token,
				sent => $sent, received => $received };
			push @{ $claims{$key} }, $c;
			$claim_of{$req} = $c;
		}
		elsif ($type eq 'EFFECT')
		{
			push @unexpected, $line unless $f[4] =~ /^(ok|lost|down)$/;
		}
		elsif ($type eq 'FINISH' || $type eq 'ABANDON')
		{
			my (undef, $key, $req, $token, $sent, $received, $status, $answer) = @f;
			if ($status eq 'ok')
			{
				push @accepted, { verb => $type, key => $key, req => $req,
					token => $token, sent => $sent, received => $received };
				push @{ $acked{$key} }, [ $answer, "req $req (finish)" ]
				  if $type eq 'FINISH' && $key =~ /^ext-/;
			}
			elsif ($status =~ /^IK00[234]$/)
			{
				$refused++;
			}
			elsif ($status !~ /^(lost|down)$/)
			{
				push @unexpected, $line;
			}
		}
		elsif ($type eq 'FENCED')
		{
			$fenced_req{ $f[2] } = 1 if $f[4] eq 'ok';
		}
	}
	close $fh;
}

my @tx_keys = grep { /^tx-/ } sort keys %seen_key;
my @ext_keys = grep { /^ext-/ } sort keys %seen_key;

is(scalar(@unexpected), 0, 'no client got an error other than a lost connection or a refusal of fencing')
  or diag join("\n", @unexpected[ 0 .. ($#unexpected < 9 ? $#unexpected : 9) ]);

#
# The transactional mode: one effect per key, none lost
#

my %charge;
foreach my $row (split /\n/, $node->safe_psql('postgres',
		q{SELECT req, key, attempt, worker FROM charges WHERE key LIKE 'tx-%' ORDER BY req}))
{
	my ($req, $key, $attempt, $worker) = split /\|/, $row;
	push @{ $charge{$key} }, { req => $req, token => $attempt, worker => $worker };
}
my @doubled = grep { @{ $charge{$_} } > 1 } sort keys %charge;
is(scalar(@doubled), 0, 'no key of the transactional mode has two business effects')
  or diag "keys with two or more charges: @doubled";

my @lost_charges = grep {
	my $req = $_;
	!grep { $_->{req} == $req } @{ $charge{ $tx_log{$req}{key} } || [] }
} grep { $tx_log{$_}{outcome} eq 'execute' && $tx_log{$_}{result} eq 'committed' } keys %tx_log;
is(scalar(@lost_charges), 0, 'every charge a client saw committed is there')
  or diag "lost: @lost_charges";

is($node->safe_psql('postgres',
		q{SELECT count(*) FROM charges WHERE key LIKE 'victim-%'}),
	'0', 'the charges of the transactions killed by SIGKILL are gone');

# The committed claims of the transactional mode are its charges; their
# windows are those of the client's whole transaction.
foreach my $key (keys %charge)
{
	foreach my $c (@{ $charge{$key} })
	{
		my $t = $tx_log{ $c->{req} }
		  or die "charge $c->{req} has no request in the clients' logs";
		push @{ $claims{$key} }, { key => $key, req => $c->{req}, token => $c->{token},
			sent => $t->{sent}, received => $t->{received} };
	}
}

#
# Fencing
#

# Never issued twice: among the claims that committed (the ones a client saw
# and could act on), each token of a key appears once.  The diagnostics say
# on which keys: ext- keys live for a day, so a token comes back there only
# after an abandon; exp- keys also expire and are cleaned up.
my @reissued;
my %reissued_on;
my $claims_checked = 0;
foreach my $key (sort keys %claims)
{
	my %seen;
	foreach my $c (@{ $claims{$key} })
	{
		$claims_checked++;
		if (exists $seen{ $c->{token} })
		{
			push @reissued, "$key: token $c->{token} to req $seen{$c->{token}} and again to req $c->{req}";
			$reissued_on{ $key =~ /^(\w+)-/ ? $1 : $key }++;
		}
		$seen{ $c->{token} } //= $c->{req};
	}
}
is(scalar(@reissued), 0, 'no fencing token was issued twice for the same key')
  or diag scalar(@reissued) . " tokens issued again ("
  . join(', ', map { "$reissued_on{$_} on $_- keys" } sort keys %reissued_on)
  . "), for example:\n"
  . join("\n", @reissued[ 0 .. ($#reissued < 4 ? $#reissued : 4) ]);

# Only growing: a claim sent after another claim of the same key had been
# answered got the greater token.
my @not_growing;
foreach my $key (sort keys %claims)
{
	my @c = @{ $claims{$key} };
	foreach my $later (@c)
	{
		my ($earlier) = grep {
			$_->{received} < $later->{sent} && !($_->{token} < $later->{token})
		} @c;
		push @not_growing, "$key: req $later->{req} got $later->{token} after req $earlier->{req} had got $earlier->{token}"
		  if $earlier;
	}
}
is(scalar(@not_growing), 0, 'a token issued after another one for the same key is greater')
  or diag scalar(@not_growing) . " claims got a token not greater than an earlier one, for example:\n"
  . join("\n", @not_growing[ 0 .. ($#not_growing < 4 ? $#not_growing : 4) ]);

# No stale finish or abandon: one that was accepted must come from a claim
# that no other claim of the key provably followed before it was sent.
my @stale;
foreach my $acc (@accepted)
{
	my $mine = $claim_of{ $acc->{req} }
	  or die "accepted $acc->{verb} of req $acc->{req} without a claim in the log";
	my ($other) = grep {
		$_->{req} != $acc->{req}
		  && $_->{sent} > $mine->{received}
		  && $_->{received} < $acc->{sent}
	} @{ $claims{ $acc->{key} } };
	push @stale, "$acc->{key}: $acc->{verb} of req $acc->{req} (token $acc->{token}) accepted after req $other->{req} had claimed the key (token $other->{token})"
	  if $other;
}
is(scalar(@stale), 0, 'no finish or abandon with a stale token was accepted')
  or diag scalar(@stale) . " stale acceptances, for example:\n"
  . join("\n", @stale[ 0 .. ($#stale < 4 ? $#stale : 4) ]);

#
# Nothing stuck, and every acknowledged answer replays
#

ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM idempotency.registry
	 WHERE status = 'processing' AND lease_until > pg_catalog.now()}),
	'every lease runs out');

my @all_keys = (@tx_keys, @ext_keys, @exp_keys, @victim_keys);
my $key_array = join(',', map { "'$_'" } @all_keys);
my %final;
foreach my $row (split /\n/, $node->safe_psql('postgres', qq{
	SELECT k, b.outcome, coalesce(b.response::text, '')
	  FROM unnest(ARRAY[$key_array]) AS k,
		   LATERAL idempotency.idempotent_begin(k::idempotency.key,
				request => CASE WHEN k LIKE 'victim-%' THEN NULL
								ELSE pg_catalog.jsonb_build_object('key', k) END, external => true) AS b},
		extra_params => [ '-U', 'storm_app' ]))
{
	my ($key, $outcome, $response) = split /\|/, $row, 3;
	$final{$key} = { outcome => $outcome, answer => answer_of($response) };
}
my @stuck = grep { !defined $final{$_} || $final{$_}{outcome} !~ /^(execute|replay)$/ } @all_keys;
is(scalar(@stuck), 0, 'once every lease has passed, every key executes or replays')
  or diag "stuck: @stuck";
my @victims_left = grep { $final{$_}{outcome} ne 'execute' } @victim_keys;
is(scalar(@victims_left), 0, 'a claim whose transaction died with its backend is gone')
  or diag "still there: @victims_left";

my @mismatch;
my $answers_checked = 0;
foreach my $key (sort keys %acked)
{
	foreach my $ans (@{ $acked{$key} })
	{
		$answers_checked++;
		push @mismatch, "$key: $ans->[1] saw $ans->[0], it now $final{$key}{outcome}s $final{$key}{answer}"
		  unless $final{$key}{outcome} eq 'replay' && $final{$key}{answer} eq $ans->[0];
	}
}
is(scalar(@mismatch), 0, 'every answer a client saw acknowledged replays identically')
  or diag scalar(@mismatch) . " answers differ, for example:\n"
  . join("\n", @mismatch[ 0 .. ($#mismatch < 4 ? $#mismatch : 4) ]);

# A transactional key's stored answer is its charge.
my @wrong_charge;
foreach my $key (@tx_keys)
{
	next unless $final{$key}{outcome} eq 'replay';
	my @c = @{ $charge{$key} || [] };
	push @wrong_charge, $key
	  unless @c == 1 && $final{$key}{answer} eq "$c[0]{req}/$c[0]{worker}/$c[0]{token}";
}
is(scalar(@wrong_charge), 0, 'the stored answer of every transactional key is its one charge')
  or diag "@wrong_charge";

# A completed external key stores the answer of the last token issued for
# it, for work that was done under that token and never marked fenced.
my %effect;
foreach my $row (split /\n/, $node->safe_psql('postgres',
		q{SELECT req, key, attempt, coalesce(fenced, '') FROM effects}))
{
	my ($req, $key, $attempt, $fenced) = split /\|/, $row;
	$effect{$req} = { key => $key, token => $attempt, fenced => $fenced };
}
my @wrong_result;
foreach my $key (@ext_keys)
{
	next unless $final{$key}{outcome} eq 'replay';
	my ($req, undef, $token) = split m{/}, $final{$key}{answer};
	my $max = (sort { $b <=> $a } map { $_->{token} } @{ $claims{$key} || [] })[0];
	my $e = $effect{$req};
	push @wrong_result, "$key: stored token $token, highest issued " . ($max // 'none')
	  . ($e ? ", effect token $e->{token}" . ($e->{fenced} ne '' ? " fenced $e->{fenced}" : '') : ', no effect')
	  unless defined $max && $token == $max && $e && $e->{key} eq $key
	  && $e->{token} == $token && $e->{fenced} eq '' && !$fenced_req{$req};
}
is(scalar(@wrong_result), 0, 'a completed external key stores the work of its last token')
  or diag scalar(@wrong_result) . " keys store another answer, for example:\n"
  . join("\n", @wrong_result[ 0 .. ($#wrong_result < 4 ? $#wrong_result : 4) ]);

my $terminated = () = PostgreSQL::Test::Utils::slurp_file($node->logfile)
  =~ /terminating connection due to administrator command/g;
ok($kills{kill9} > 0 && $kills{immediate} > 0 && $terminated > 0,
	'the storm killed sessions, backends and the postmaster');

my $effects = scalar(keys %effect);
my $charges = scalar(map { @$_ } values %charge);
diag sprintf("crash storm: %d requests (%d transactional, %d external), "
	  . "%d sessions terminated, %d kill -9 of a backend, %d immediate restarts; "
	  . "%d charges, %d external effects, %d claims, %d accepted finish/abandon, "
	  . "%d refused by fencing, %d replays, %d acknowledged answers checked; %.0f s",
	$requests, $tx_requests, $ext_requests, $terminated, $kills{kill9},
	$kills{immediate}, $charges, $effects, $claims_checked, scalar(@accepted),
	$refused, $replays, $answers_checked, now_mono() - $started);

$node->stop;
done_testing();
