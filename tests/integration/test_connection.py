"""Reaching Redis the way production does: unix sockets, databases, ACL users, passwords from
the environment and files, TLS, timeouts, reconnection, and the config file."""
import os
import shutil
import socket
import ssl
import stat
import struct
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (RLOCK, BlackHole, CommandRefusingProxy, RedisServer, RedisTestCase,
                     free_port, rlock_env, run_rlock, start_rlock, wait_until)

SECRET = "s3cret-Pa55"


class Reaching(RedisTestCase):
    def test_unix_socket(self):
        url = f"unix://{self.server.unix_socket}"
        before = self.server.time_us()
        r = run_rlock(["run", "--redis", url, "k", "--", "sh", "-c", "echo $RLOCK_FENCE"],
                      env=rlock_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(int(r.stdout), before)
        self.assertEqual(self.server.cmd("GET", "{k}:rlock:fence"), r.stdout.strip())

    def test_addresses_as_numbers_and_as_names(self):
        server = RedisServer("--bind", "127.0.0.1", "::1")  # the last --bind wins: both
        try:
            # IPv4 and IPv6 literals are connected to directly, names are resolved.
            for n, host in enumerate(("127.0.0.1", "[::1]", "localhost")):
                url = f"redis://{host}:{server.port}"
                r = run_rlock(["run", "--redis", url, f"k{n}", "--", "true"], env=rlock_env())
                self.assertEqual(r.returncode, 0, f"{url}: {r.stderr}")
                self.assertIsNotNone(server.cmd("GET", f"{{k{n}}}:rlock:fence"), url)
            r = run_rlock(["status", "--redis", f"redis://[::1]:{server.port}", "k0"],
                          env=rlock_env())
            self.assertEqual(r.returncode, 1, r.stderr)  # free, asked over IPv6
            self.assertIn("free", r.stdout)
        finally:
            server.stop()

    def test_database_number(self):
        url = f"redis://127.0.0.1:{self.server.port}/3"
        p = start_rlock(["run", "--redis", url, "k", "--", "sleep", "30"], env=rlock_env())
        self.procs.append(p)
        c = self.server.client()
        c("SELECT", 3)
        wait_until(lambda: c("GET", "k"), 5, "the lock in db 3")
        self.assertIsNone(self.server.cmd("GET", "k"))  # db 0 untouched
        c.close()

    def test_dropped_connection_is_reconnected_by_the_lease_keeper(self):
        p = self.start(["run", "--ttl", "900ms", "k", "--", "sleep", "2.5"])
        wait_until(lambda: self.server.cmd("GET", "k"), 5, "lock taken")
        killed = self.server.cmd("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        self.assertGreaterEqual(killed, 1)
        self.assertEqual(p.wait(timeout=15), 0, p.stderr.read())
        self.assert_no_lock("k")

    def test_scripts_go_by_sha_and_survive_a_script_flush(self):
        self.server.cmd("SCRIPT", "FLUSH")
        self.server.cmd("CONFIG", "RESETSTAT")
        # Four renewals, a second apart: room for a sanitizer build on a loaded machine.
        r = self.run_rlock(["run", "--ttl", "3s", "k", "--", "sleep", "4.2"])
        self.assertEqual(r.returncode, 0, r.stderr)
        stats = self.server.cmd("INFO", "commandstats")
        calls = {line.split(":")[0]: int(line.split("calls=")[1].split(",")[0])
                 for line in stats.splitlines() if line.startswith("cmdstat_")}
        # Each script is sent whole once (NOSCRIPT fallback), then by SHA only: acquire,
        # renew, release and the history entry's.
        self.assertLessEqual(calls.get("cmdstat_eval", 0), 4)
        self.assertGreaterEqual(calls.get("cmdstat_evalsha", 0), 5)
        # The history entry rode in the release's round trip, ahead of the release's resend
        # with its source: recorded once, and the lock is gone.
        self.assert_no_lock("k")
        entries = self.server.cmd("XRANGE", "{k}:rlock:history", "-", "+")
        self.assertEqual(len(entries), 1, entries)
        fields = entries[0][1]
        self.assertEqual(dict(zip(fields[::2], fields[1::2]))["end"], "exited")

    def test_a_server_that_never_answers_times_out(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        accepted = []
        threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
        port = listener.getsockname()[1]
        start = time.monotonic()
        r = run_rlock(["run", "--redis", f"redis://127.0.0.1:{port}", "--command-timeout", "300ms",
                       "k", "--", "true"], env=rlock_env())
        self.assertEqual(r.returncode, 69)
        self.assertIn("timed out", r.stderr)
        self.assertLess(time.monotonic() - start, 5)
        for conn, _ in accepted:
            conn.close()
        listener.close()


class IdleTimeout(RedisTestCase):
    """A server (or a proxy, a load balancer) that closes idle connections: rlock reconnects
    without a word. Under cron every line of stderr is mail."""

    server_args = ("--timeout", "1")

    def test_connections_closed_while_idle_cost_no_warning(self):
        # Renewals 1.5 s apart and the end 4 s after the acquire: every connection rlock uses
        # again has been idle past the server's 1 s timeout.
        r = self.run_rlock(["run", "--ttl", "4500ms", "--once-per", "day", "k", "--",
                            "sleep", "4"])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assert_no_lock("k")
        history = self.run_rlock(["history", "k"])
        self.assertIn("exit 0", history.stdout)


class RefusedCommands(RedisTestCase):
    """A proxy that does not pass a command rlock needs closes the connection at it, as
    twemproxy does: rlock names the command in one line, not "connection closed by server"."""

    TWEMPROXY_REFUSES = ("TIME", "XADD", "XREVRANGE", "XRANGE", "INFO", "SCAN")

    def setUp(self):
        super().setUp()
        self.proxy = CommandRefusingProxy(self.server.port, self.TWEMPROXY_REFUSES)
        self.addCleanup(self.proxy.close)
        self.env = rlock_env(RLOCK_REDIS_URL=self.proxy.url)

    def assert_named(self, args, command, status=69):
        r = run_rlock(args, env=self.env)
        self.assertEqual(r.returncode, status, r.stderr)
        line = next((l for l in r.stderr.splitlines() if "does not pass" in l), r.stderr)
        self.assertIn(f"{self.proxy.url} does not pass {command}: rlock needs it ", line)
        self.assertNotIn("closed by server", r.stderr)
        return r

    def test_each_verb_names_the_command(self):
        for args, command in ((["status", "k"], "TIME"), (["inspect", "k"], "TIME"),
                              (["list"], "INFO"), (["history", "k"], "XREVRANGE"),
                              (["check", "k", "--every", "1h"], "TIME"),
                              (["watch", "k"], "TIME")):
            r = self.assert_named(args, command)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        # A run goes through: its scripts pass, the history entry's too (XADD inside it).
        r = run_rlock(["run", "k", "--", "true"], env=self.env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.server.cmd("XLEN", "{k}:rlock:history"), 1)
        self.assert_no_lock("k")

    def test_a_server_that_goes_down_is_not_blamed_on_a_command(self):
        server = RedisServer()
        proxy = CommandRefusingProxy(server.port, ())
        self.addCleanup(proxy.close)
        watch = start_rlock(["watch", "k"], env=rlock_env(RLOCK_REDIS_URL=proxy.url))
        self.addCleanup(lambda: (watch.kill(), watch.wait(), watch.stdout.close(),
                                 watch.stderr.close()))
        self.assertTrue(watch.stdout.readline().startswith("watching k by polling"))
        watch.stdout.readline()
        server.stop()
        line = watch.stdout.readline()
        self.assertIn("Redis unreachable", line)
        self.assertNotIn("does not pass", line)


@unittest.skipUnless(shutil.which("nutcracker"), "twemproxy (Debian's nutcracker) is not installed")
class Twemproxy(RedisTestCase):
    """rlock behind twemproxy 0.5: what works, and what it names."""

    def setUp(self):
        super().setUp()
        port = free_port()
        conf = self.path("nutcracker.yml")
        with open(conf, "w") as f:
            f.write(f"alpha:\n  listen: 127.0.0.1:{port}\n  redis: true\n"
                    f"  servers:\n   - 127.0.0.1:{self.server.port}:1\n")
        self.nutcracker = subprocess.Popen(["nutcracker", "-c", conf, "-o", self.path("log"),
                                            "-a", "127.0.0.1", "-s", str(free_port())],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (self.nutcracker.kill(), self.nutcracker.wait()))

        def listening():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return True
            except OSError:
                return False
        wait_until(listening, 10, "nutcracker to listen")
        self.url = f"redis://127.0.0.1:{port}"
        self.env = rlock_env(RLOCK_REDIS_URL=self.url)

    def test_what_works_and_what_is_named(self):
        r = run_rlock(["acquire", "--ttl", "30s", "k"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run_rlock(["release", "k", "--token", r.stdout.strip()],
                                   env=self.env).returncode, 0)
        self.assert_no_lock("k")
        for args, command in ((["status", "k"], "TIME"), (["list"], "INFO"),
                              (["history", "k"], "XREVRANGE"), (["watch", "k"], "TIME")):
            r = run_rlock(args, env=self.env)
            self.assertEqual(r.returncode, 69, r.stderr)
            self.assertIn(f"{self.url} does not pass {command}: rlock needs it ", r.stderr)
        # A run, its end and its history entry pass (XADD inside a script), with no warning,
        # under twemproxy's own connection handling.
        for _ in range(3):
            r = run_rlock(["run", "k", "--", "true"], env=self.env)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.server.cmd("XLEN", "{k}:rlock:history"), 3)
        self.assert_no_lock("k")


class Passwords(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = RedisServer("--requirepass", SECRET)
        cls.url = f"redis://127.0.0.1:{cls.server.port}"
        c = cls.server.client()
        c("AUTH", SECRET)
        c("ACL", "SETUSER", "app", "on", ">app-" + SECRET, "~*", "+@all")
        c.close()
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def run_with(self, args, **env):
        return run_rlock(["run"] + args + ["k", "--", "true"], env=rlock_env(**env))

    def assert_secret_absent(self, r):
        for secret in (SECRET, "app-" + SECRET, "wrong-" + SECRET):
            self.assertNotIn(secret, r.stdout + r.stderr)

    def test_acl_user_in_the_url(self):
        r = self.run_with(["--redis", f"redis://app:app-{SECRET}@127.0.0.1:{self.server.port}"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_wrong_password_is_69_and_never_printed(self):
        r = self.run_with(["--redis", f"redis://app:wrong-{SECRET}@127.0.0.1:{self.server.port}"])
        self.assertEqual(r.returncode, 69)
        self.assertIn("WRONGPASS", r.stderr)
        self.assertIn("redis://app:***@", r.stderr)
        self.assert_secret_absent(r)

    def test_no_password_says_how_to_give_one(self):
        # run's first command is long enough that Redis cuts it off ("Protocol error:
        # unauthenticated multibulk length") where status's gets NOAUTH: both say it plainly.
        for r in (self.run_with(["--redis", self.url]),
                  run_rlock(["status", "k", "--redis", self.url], env=rlock_env())):
            self.assertEqual(r.returncode, 69)
            self.assertRegex(r.stderr, r"wants a password \(it cut off a command|NOAUTH Auth")
            self.assertIn("give the password", r.stderr)
            for way in ("REDISCLI_AUTH", "--password-file", "--password-command",
                        "password in the config file"):
                self.assertIn(way, r.stderr)

    def test_a_wrong_password_says_where_it_came_from(self):
        # Never the password itself: where it was given, as rlock config would show.
        path = os.path.join(self.tmp, "wrong-password")
        with open(path, "w") as f:
            f.write("wrong-" + SECRET + "\n")
        os.chmod(path, 0o600)
        config = os.path.join(self.tmp, "wrong.toml")
        with open(config, "w") as f:
            f.write(f'password = "wrong-{SECRET}"\n')
        os.chmod(config, 0o600)
        for args, env, said in (
                ([], {"REDISCLI_AUTH": "wrong-" + SECRET}, "from the environment's REDISCLI_AUTH"),
                (["--password-file", path], {}, f"from the file {path} (--password-file)"),
                (["--config", config], {}, f"from the config file, {config}:1:1"),
                ([], {"RLOCK_REDIS_URL": f"redis://:wrong-{SECRET}@127.0.0.1:{self.server.port}"},
                 "from the URL")):
            with self.subTest(said=said):
                url = [] if "RLOCK_REDIS_URL" in env else ["--redis", self.url]
                r = self.run_with(url + args, **env)
                self.assertEqual(r.returncode, 69, r.stderr)
                self.assertIn("WRONGPASS", r.stderr)
                self.assertIn("the password came " + said, r.stderr)
                self.assert_secret_absent(r)


    def test_rediscli_auth(self):
        r = self.run_with(["--redis", self.url], REDISCLI_AUTH=SECRET)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_rlock_password_beats_rediscli_auth(self):
        r = self.run_with(["--redis", self.url], RLOCK_PASSWORD=SECRET, REDISCLI_AUTH="wrong-" + SECRET)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_with(["--redis", self.url], RLOCK_PASSWORD="wrong-" + SECRET, REDISCLI_AUTH=SECRET)
        self.assertEqual(r.returncode, 69)
        self.assert_secret_absent(r)

    def test_password_file_and_its_permissions(self):
        path = os.path.join(self.tmp, "pw")
        with open(path, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(path, 0o600)
        r = self.run_with(["--redis", self.url, "--password-file", path])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        os.chmod(path, 0o644)
        r = self.run_with(["--redis", self.url, "--password-file", path])
        self.assertEqual(r.returncode, 0)
        self.assertIn("can be read by others", r.stderr)
        # The flag beats the environment.
        os.chmod(path, 0o600)
        r = self.run_with(["--redis", self.url, "--password-file", path], RLOCK_PASSWORD="wrong")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_with(["--redis", self.url, "--password-file", os.path.join(self.tmp, "none")])
        self.assertEqual(r.returncode, 78)

    def test_acl_user_with_password_from_the_environment(self):
        r = self.run_with(["--redis", f"redis://app:@127.0.0.1:{self.server.port}"],
                          RLOCK_PASSWORD="app-" + SECRET)
        self.assertEqual(r.returncode, 0, r.stderr)


def make_certificates(directory):
    """A CA and a server certificate for 127.0.0.1 and localhost, made with the openssl CLI."""
    def sh(*args):
        subprocess.run(args, cwd=directory, check=True, capture_output=True)
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
       "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=rlock test CA")
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
       "-out", "server.csr", "-subj", "/CN=localhost")
    with open(os.path.join(directory, "ext.cnf"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sh("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
       "-CAcreateserial", "-days", "2", "-out", "server.crt", "-extfile", "ext.cnf")
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
       "-keyout", "other-ca.key", "-out", "other-ca.crt", "-subj", "/CN=some other CA")


def tls_server(certs, port):
    """A redis-server on PORT speaking TLS with the certificates make_certificates() made in
    CERTS (its plain port is a free one of its own)."""
    cert = lambda name: os.path.join(certs, name)
    return RedisServer("--tls-port", str(port), "--tls-cert-file", cert("server.crt"),
                       "--tls-key-file", cert("server.key"), "--tls-ca-cert-file", cert("ca.crt"),
                       "--tls-auth-clients", "no")


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="rlock-tls-")
        make_certificates(cls.certs)
        cls.tls_port = free_port()
        cls.server = tls_server(cls.certs, cls.tls_port)
        cls.marker = os.path.join(cls.certs, "ran")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        if os.path.exists(self.marker):
            os.unlink(self.marker)

    def run_tls(self, host, *args):
        return run_rlock(["run", "--redis", f"rediss://{host}:{self.tls_port}", *args,
                          "k", "--", "touch", self.marker], env=rlock_env())

    def test_with_the_ca_it_works(self):
        for host in ("127.0.0.1", "localhost"):
            with self.subTest(host=host):
                os.path.exists(self.marker) and os.unlink(self.marker)
                r = self.run_tls(host, "--cacert", os.path.join(self.certs, "ca.crt"))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(os.path.exists(self.marker))

    def test_without_the_ca_the_certificate_is_refused_and_nothing_runs(self):
        r = self.run_tls("127.0.0.1")
        self.assertEqual(r.returncode, 69)
        self.assertIn("certificate", r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertFalse(os.path.exists(self.marker))

    def test_another_ca_is_refused(self):
        r = self.run_tls("127.0.0.1", "--cacert", os.path.join(self.certs, "other-ca.crt"))
        self.assertEqual(r.returncode, 69)
        self.assertIn("certificate verification failed", r.stderr)

    def test_a_refused_certificate_ends_a_wait_at_once(self):
        start = time.monotonic()
        r = self.run_tls("127.0.0.1", "-w", "60s")
        self.assertEqual(r.returncode, 69)
        self.assertIn("certificate", r.stderr)
        self.assertNotIn("retried", r.stderr)
        self.assertLess(time.monotonic() - start, 20, "a refused certificate was retried")
        self.assertFalse(os.path.exists(self.marker))

    def test_a_name_the_certificate_does_not_carry_is_refused(self):
        r = self.run_tls("127.0.0.1", "--cacert", os.path.join(self.certs, "ca.crt"),
                         "--sni", "not-this-server.example")
        self.assertEqual(r.returncode, 69)
        self.assertIn("certificate", r.stderr)
        self.assertFalse(os.path.exists(self.marker))

    def test_unusable_tls_material_is_78(self):
        r = self.run_tls("127.0.0.1", "--cacert", os.path.join(self.certs, "missing.crt"))
        self.assertEqual(r.returncode, 78)
        self.assertIn("missing.crt", r.stderr)
        r = self.run_tls("127.0.0.1", "--cacert", os.path.join(self.certs, "ca.crt"),
                         "--cert", os.path.join(self.certs, "server.crt"))
        self.assertEqual(r.returncode, 78)
        self.assertIn("--key", r.stderr)

    def test_redlock_over_tls_with_two_of_five_black_holed(self):
        # The three TLS masters' handshakes run side by side in one loop, and their quorum goes
        # on without the two ports that never answer a connect.
        ports = [free_port(), free_port()]
        others = [tls_server(self.certs, port) for port in ports]
        for server in others:
            self.addCleanup(server.stop)
        holes = [BlackHole() for _ in range(2)]
        for hole in holes:
            self.addCleanup(hole.close)
            self.assertTrue(hole.hangs())
        # One master has run the scripts before, the two new ones answer NOSCRIPT: that round
        # must not wait for the black holes (a yes and two NOSCRIPTs may yet be a quorum).
        ca = ["--cacert", os.path.join(self.certs, "ca.crt")]
        self.assertEqual(run_rlock(["run", "--redis", f"rediss://127.0.0.1:{self.tls_port}"] + ca +
                                   ["k0", "--", "true"], env=rlock_env()).returncode, 0)
        urls = []
        for port in (self.tls_port, holes[0].port, ports[0], holes[1].port, ports[1]):
            urls += ["--redis", f"rediss://127.0.0.1:{port}"]
        begin = time.monotonic()
        r = run_rlock(["run"] + urls + ["--cacert", os.path.join(self.certs, "ca.crt"),
                                        "--connect-timeout", "5s", "k", "--", "touch",
                                        self.marker], env=rlock_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(self.marker))
        self.assertLess(time.monotonic() - begin, 2.5, "a connect timeout was waited for")
        self.assertEqual([s.cmd("GET", "k") for s in [self.server] + others], [None] * 3)

    def test_plain_redis_to_a_tls_port_fails_cleanly(self):
        r = run_rlock(["run", "--redis", f"redis://127.0.0.1:{self.tls_port}", "--command-timeout",
                       "1s", "k", "--", "touch", self.marker], env=rlock_env())
        self.assertEqual(r.returncode, 69)
        self.assertFalse(os.path.exists(self.marker))


    def test_redis_cli_habits_u_and_tls(self):
        # redis-cli -u redis://host:port --tls: the plain URL, and TLS by flag.
        ca = os.path.join(self.certs, "ca.crt")
        r = run_rlock(["run", "-u", f"redis://localhost:{self.tls_port}", "--tls", "--cacert", ca,
                       "k", "--", "touch", self.marker], env=rlock_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(self.marker))
        # The same URL without --tls is plain text to a TLS port: refused, nothing ran.
        os.unlink(self.marker)
        r = run_rlock(["run", "-u", f"redis://localhost:{self.tls_port}", "--command-timeout",
                       "1s", "k", "--", "touch", self.marker], env=rlock_env())
        self.assertEqual(r.returncode, 69)
        self.assertFalse(os.path.exists(self.marker))
        # A socket has no TLS.
        r = run_rlock(["status", "-u", "unix:///tmp/redis.sock", "--tls", "k"], env=rlock_env())
        self.assertEqual(r.returncode, 78)
        self.assertIn("--tls: a unix:// socket has no TLS", r.stderr)


def make_client_certificates(directory):
    """Client certificates in DIRECTORY (beside make_certificates()'s): client.crt signed by
    the server's CA, stranger.crt by another CA."""
    def sh(*args):
        subprocess.run(args, cwd=directory, check=True, capture_output=True)
    for name, ca in (("client", "ca"), ("stranger", "other-ca")):
        sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
           "-out", f"{name}.csr", "-subj", f"/CN=rlock {name}")
        sh("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey",
           f"{ca}.key", "-CAcreateserial", "-days", "2", "-out", f"{name}.crt")


class ResetAfterCertificateRequest:
    """Not a Redis: a TLS 1.3 port that asks for a client certificate, accepts whatever comes,
    sends no session ticket, and resets the connection: a refusing server whose alert the
    reset overtook, which a loaded machine shows now and then (test below)."""

    def __init__(self, certs):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_3
        self.context.load_cert_chain(os.path.join(certs, "server.crt"),
                                     os.path.join(certs, "server.key"))
        self.context.load_verify_locations(os.path.join(certs, "ca.crt"))
        self.context.verify_mode = ssl.CERT_OPTIONAL
        self.context.num_tickets = 0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.handshakes = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            try:
                with self.context.wrap_socket(raw, server_side=True) as conn:
                    self.handshakes += 1
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
            except (OSError, ssl.SSLError):
                raw.close()

    def close(self):
        self.listener.close()


class TlsClientCertificates(unittest.TestCase):
    """A server that wants a client certificate (tls-auth-clients yes) and is refused one: its
    alert is named and ends a wait at once, as a server certificate rlock refuses does. Under
    TLS 1.3 (the default) the refusal reaches rlock at its first read after the handshake;
    under TLS 1.2, during it."""

    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="rlock-tls-")
        make_certificates(cls.certs)
        make_client_certificates(cls.certs)
        cert = lambda name: os.path.join(cls.certs, name)
        cls.servers = {}
        for protocols in ("TLSv1.3", "TLSv1.2"):
            port = free_port()
            server = RedisServer("--tls-port", str(port), "--tls-cert-file", cert("server.crt"),
                                 "--tls-key-file", cert("server.key"), "--tls-ca-cert-file",
                                 cert("ca.crt"), "--tls-auth-clients", "yes",
                                 "--tls-protocols", protocols)
            cls.servers[protocols] = (server, port)

    @classmethod
    def tearDownClass(cls):
        for server, _ in cls.servers.values():
            server.stop()
        shutil.rmtree(cls.certs, True)

    def run_with(self, port, *args):
        marker = os.path.join(self.certs, "ran")
        if os.path.exists(marker):
            os.unlink(marker)
        begin = time.monotonic()
        r = run_rlock(["run", "--redis", f"rediss://127.0.0.1:{port}", "--cacert",
                       os.path.join(self.certs, "ca.crt"), *args, "k", "--", "touch", marker],
                      env=rlock_env())
        return r, time.monotonic() - begin, os.path.exists(marker)

    def test_a_refused_client_certificate_ends_a_wait_at_once_with_the_reason(self):
        cert = lambda name: ["--cert", os.path.join(self.certs, f"{name}.crt"), "--key",
                             os.path.join(self.certs, f"{name}.key")]
        for protocols, (server, port) in self.servers.items():
            for given, reason in (([], "certificate required"),
                                  (cert("stranger"), "unknown ca")):
                # TLS 1.2 names a missing certificate "handshake failure".
                if protocols == "TLSv1.2" and not given:
                    reason = "handshake failure"
                named = 0
                # Under TLS 1.3 the server's reset may overtake its alert (now and then on a
                # loaded machine): then the refusal is told by when the server went (the test
                # below). Three tries, of which one at least names the alert.
                for attempt in range(3):
                    with self.subTest(protocols=protocols, cert=given[1:2], attempt=attempt):
                        r, took, ran = self.run_with(port, "--wait", "8s", *given)
                        self.assertEqual(r.returncode, 69, r.stderr)
                        self.assertRegex(r.stderr, f"127.0.0.1:{port} refused the TLS "
                                         f"connection: ({reason}|closed right after asking for "
                                         "a client certificate)")
                        named += f"refused the TLS connection: {reason}" in r.stderr
                        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                        self.assertNotIn("retried", r.stderr)
                        # At once: a retried refusal would take the whole 8 s.
                        self.assertLess(took, 4, r.stderr)
                        self.assertFalse(ran)
                        self.assertIsNone(server.cmd("GET", "k"))
                self.assertGreater(named, 0, f"{protocols}: the alert '{reason}' never named")
            with self.subTest(protocols=protocols, cert="client"):
                r, _, ran = self.run_with(port, "--wait", "8s", *cert("client"))
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(ran)

    def test_a_reset_after_a_certificate_request_is_a_refusal(self):
        # Its alert lost, the refusal is told by when the server went: right after asking for
        # a certificate, before any word of its own.
        front = ResetAfterCertificateRequest(self.certs)
        self.addCleanup(front.close)
        r, took, ran = self.run_with(front.port, "--wait", "8s", "--cert",
                                     os.path.join(self.certs, "client.crt"), "--key",
                                     os.path.join(self.certs, "client.key"))
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertEqual(r.stderr, f"rlock: error: k: 127.0.0.1:{front.port} refused the TLS "
                         "connection: closed right after asking for a client certificate (it "
                         "does not accept that of --cert, or wants one: --cert and --key)\n")
        self.assertLess(took, 4)
        self.assertFalse(ran)
        self.assertEqual(front.handshakes, 1)


class DefaultRedis(RedisTestCase):
    """Under cron nothing names a Redis unless a config file does: each host would lock in its
    own. rlock says so, even with -q, unless stderr is a terminal."""

    def test_the_default_url_is_named_in_a_warning(self):
        home = tempfile.mkdtemp(prefix="rlock-home-")
        self.addCleanup(shutil.rmtree, home, True)
        env = rlock_env(XDG_CONFIG_HOME=home, HOME=home)
        r = run_rlock(["status", "k", "-q"], env=env)
        self.assertIn("warning: no Redis configured", r.stderr)
        self.assertIn("redis://127.0.0.1:6379", r.stderr)
        # Named anywhere (even as the default's own URL): no warning.
        for named in (rlock_env(self.server), dict(env, RLOCK_REDIS_URL=self.server.url)):
            r = run_rlock(["status", "k"], env=named)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stderr, "")
        config = os.path.join(home, "config.toml")
        with open(config, "w") as f:
            f.write(f'redis = "{self.server.url}"\n')
        r = run_rlock(["status", "--config", config, "k"], env=env)
        self.assertEqual((r.returncode, r.stderr), (1, ""))
        # Inside an rlock run the outer rlock has said it: a nested one stays quiet.
        nested = dict(env, RLOCK_KEY="outer")
        self.assertNotIn("no Redis configured", run_rlock(["status", "k"], env=nested).stderr)

    def test_no_warning_on_a_terminal(self):
        import pty
        home = tempfile.mkdtemp(prefix="rlock-home-")
        self.addCleanup(shutil.rmtree, home, True)
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        r = subprocess.run([RLOCK, "status", "k"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=slave, timeout=30,
                           env=rlock_env(XDG_CONFIG_HOME=home, HOME=home))
        os.close(slave)
        seen = b""
        try:
            while chunk := os.read(master, 4096):
                seen += chunk
        except OSError:  # EIO: the terminal's other side is closed, all was read
            pass
        # 69, or 1 where a redis-server listens on this host's 6379 (Debian starts one).
        self.assertIn(r.returncode, (1, 69), seen)
        self.assertNotIn(b"no Redis configured", seen)


class ConfigFile(RedisTestCase):
    def write_config(self, text, name="config.toml"):
        path = self.path(name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_config(self, args, path=None, **env):
        environment = rlock_env(**env)
        if path:
            environment["RLOCK_CONFIG"] = path
        return run_rlock(args, env=environment)

    def test_the_file_sets_url_ttl_and_conflict_code(self):
        path = self.write_config(f'redis = "{self.server.url}"\nttl = "7s"\n'
                                 f'conflict-exit-code = 3\nprefix = "lock:"\n')
        p = start_rlock(["run", "--config", path, "k", "--", "sleep", "30"], env=rlock_env())
        self.procs.append(p)
        wait_until(lambda: self.server.cmd("GET", "lock:k"), 5, "lock taken via the file's URL")
        self.assertTrue(5000 < self.server.cmd("PTTL", "lock:k") <= 7000)
        r = self.run_config(["run", "k", "--", "true"], path)
        self.assertEqual(r.returncode, 3)

    def test_flag_beats_environment_beats_file(self):
        dead = f"redis://127.0.0.1:{free_port()}"
        good = self.server.url
        path = self.write_config(f'redis = ["{dead}"]\nttl = "7s"\n')
        # environment over file
        r = self.run_config(["run", "k", "--", "true"], path, RLOCK_REDIS_URL=good)
        self.assertEqual(r.returncode, 0, r.stderr)
        # flag over environment
        r = self.run_config(["run", "--redis", good, "k", "--", "true"], path, RLOCK_REDIS_URL=dead)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_config(["run", "--redis", dead, "k", "--", "true"], path, RLOCK_REDIS_URL=good)
        self.assertEqual(r.returncode, 69)
        # flag over file, for a run option
        p = start_rlock(["run", "--config", path, "--redis", good, "--ttl", "9s", "k", "--",
                         "sleep", "30"], env=rlock_env())
        self.procs.append(p)
        wait_until(lambda: self.server.cmd("GET", "k"), 5, "lock taken")
        self.assertTrue(7000 < self.server.cmd("PTTL", "k") <= 9000)

    def test_broken_toml_is_78_with_line_and_column(self):
        path = self.write_config('ttl = "30s"\nredis = [\n  "redis://x",\n  oops\n]\n')
        r = self.run_config(["run", "k", "--", "true"], path)
        self.assertEqual(r.returncode, 78)
        self.assertRegex(r.stderr, rf"{path}:4:\d+: ")
        self.assertEqual(len(r.stderr.splitlines()), 1)

    def test_unknown_key_is_78_naming_it(self):
        path = self.write_config('ttl = "30s"\n\ntimeout = "5s"\n')
        r = self.run_config(["run", "k", "--", "true"], path)
        self.assertEqual(r.returncode, 78)
        self.assertIn(f"{path}:3:1: unknown key 'timeout'", r.stderr)

    def test_bad_values_in_the_file_are_78_with_their_place(self):
        for text, needle in [('ttl = "soon"\n', ":1:"), ('conflict-exit-code = "x"\n', ":1:"),
                             ('ttl = [1]\n', "expected a duration"),
                             ('quiet = "yes"\n', "expected true or false"),
                             ('redis = "http://x"\n', "unknown scheme"),
                             ('kill-after = "20s"\n', "below half the ttl")]:
            with self.subTest(text=text):
                path = self.write_config(text)
                r = self.run_config(["run", "k", "--", "true"], path)
                self.assertEqual(r.returncode, 78, r.stderr)
                self.assertIn(path, r.stderr)
                self.assertIn(needle, r.stderr)
                self.assertEqual(self.server.cmd("DBSIZE"), 0)

    def test_a_named_file_that_does_not_exist_is_78(self):
        r = self.run_config(["run", "--config", self.path("nope.toml"), "k", "--", "true"])
        self.assertEqual(r.returncode, 78)
        r = self.run_config(["run", "k", "--", "true"], self.path("nope.toml"))
        self.assertEqual(r.returncode, 78)
        self.assertIn("RLOCK_CONFIG", r.stderr)

    def test_xdg_config_home_is_searched(self):
        os.makedirs(self.path("xdg/rlock"))
        self.write_config(f'redis = "{self.server.url}"\nconflict-exit-code = 9\n', "xdg/rlock/config.toml")
        self.server.cmd("SET", "k", "held", "PX", 30000)
        env = rlock_env(XDG_CONFIG_HOME=self.path("xdg"))
        env.pop("RLOCK_REDIS_URL", None)
        r = run_rlock(["run", "k", "--", "true"], env=env)
        self.assertEqual(r.returncode, 9, r.stderr)

    def test_rlock_config_shows_values_origins_and_no_secrets(self):
        path = self.write_config(f'redis = "redis://app:{SECRET}@127.0.0.1:1"\nttl = "7s"\n')
        r = self.run_config(["config", "--ttl", "9s"], path, REDISCLI_AUTH="env-" + SECRET)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(SECRET, r.stdout + r.stderr)
        lines = {line.split()[0]: line for line in r.stdout.splitlines()}
        self.assertIn(path, lines["config-file"])
        self.assertIn("redis://app:***@127.0.0.1:1", lines["redis"])
        self.assertIn(f"file {path}:1:1", lines["redis"])
        self.assertIn("9s", lines["ttl"])
        self.assertIn("flag --ttl", lines["ttl"])
        self.assertIn("***", lines["password"])
        self.assertIn("environment REDISCLI_AUTH", lines["password"])
        self.assertIn("default", lines["conflict-exit-code"])


if __name__ == "__main__":
    unittest.main()
