"""Shipping: `cmake --install` puts every file in its standard place, and the .deb from CPack
has the right dependencies and a binary that runs from it."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import RedisServer, run_rlock

BUILD = os.environ.get("RLOCK_BUILD_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
INSTALLED = ["bin/rlock", "share/man/man1/rlock.1.gz", "share/man/man1/rlock-run.1.gz",
             "share/man/man1/rlock-status.1.gz", "share/man/man1/rlock-inspect.1.gz",
             "share/man/man1/rlock-list.1.gz", "share/man/man1/rlock-history.1.gz",
             "share/man/man1/rlock-logs.1.gz", "share/man/man1/rlock-watch.1.gz",
             "share/man/man1/rlock-check.1.gz", "share/man/man1/rlock-stop.1.gz",
             "share/man/man1/rlock-pause.1.gz", "share/man/man1/rlock-resume.1.gz",
             "share/man/man1/rlock-reset-period.1.gz", "share/man/man1/rlock-acquire.1.gz",
             "share/man/man1/rlock-extend.1.gz", "share/man/man1/rlock-release.1.gz",
             "share/man/man1/rlock-doctor.1.gz", "share/man/man1/rlock-config.1.gz",
             "share/man/man1/rlock-completion.1.gz", "share/man/man5/rlock.toml.5.gz",
             "share/man/man7/rlock-redis.7.gz", "share/bash-completion/completions/rlock",
             "share/zsh/vendor-completions/_rlock", "share/fish/vendor_completions.d/rlock.fish",
             "share/doc/rlock/LICENSE", "share/doc/rlock/copyright", "share/doc/rlock/README.md",
             "share/doc/rlock/NEWS.md", "share/doc/rlock/CONTRIBUTING.md",
             "share/doc/rlock/docs/REDIS.md", "share/doc/rlock/docs/DESIGN.md",
             "share/doc/rlock/docs/PERFORMANCE.md", "share/doc/rlock/docs/SECURITY.md",
             "share/doc/rlock/docs/ARCHITECTURE.md", "share/doc/rlock/changelog.gz",
             "share/doc/rlock/examples/config.toml", "share/doc/rlock/examples/rlock-report.service",
             "share/doc/rlock/examples/rlock-report.timer"]


class Package(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rlock-pkg-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_cmake_install_tree(self):
        prefix = os.path.join(self.tmp, "prefix")
        r = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        for path in INSTALLED:
            self.assertTrue(os.path.isfile(os.path.join(prefix, path)), path)
        self.assertTrue(os.access(os.path.join(prefix, "bin/rlock"), os.X_OK))
        # Every link between the installed documents finds its file (the README's to
        # docs/REDIS.md, REDIS.md's back to ../README.md): none is left behind in the source.
        doc = os.path.join(prefix, "share/doc/rlock")
        checked = 0
        for folder, _, files in os.walk(doc):
            for name in files:
                if not name.endswith(".md"):
                    continue
                with open(os.path.join(folder, name)) as f:
                    text = f.read()
                for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text):
                    checked += 1
                    self.assertTrue(os.path.exists(os.path.join(folder, target)),
                                    f"{os.path.relpath(folder, doc)}/{name} links to {target}, "
                                    "not installed")
        self.assertGreater(checked, 20)

    def test_deb_has_its_dependencies_and_runs(self):
        # A hiredis of one's own (built to test hiredis 1.x, README "Supported servers") belongs
        # to no package, so no .deb can depend on it. Debian's (CI's) always does.
        ldd = subprocess.run(["ldd", os.path.join(BUILD, "rlock")], capture_output=True,
                             text=True).stdout
        own = re.findall(r"libhiredis\S* => (/\S+)", ldd)
        if own and subprocess.run(["dpkg", "-S", os.path.realpath(own[0])],
                                  capture_output=True).returncode != 0:
            self.skipTest(f"{own[0]} belongs to no package")
        r = subprocess.run(["cpack", "-G", "DEB", "-B", self.tmp], cwd=BUILD, capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        debs = [f for f in os.listdir(self.tmp) if f.endswith(".deb")]
        self.assertEqual(len(debs), 1, os.listdir(self.tmp))
        deb = os.path.join(self.tmp, debs[0])
        info = subprocess.run(["dpkg-deb", "-f", deb, "Depends"], capture_output=True, text=True)
        depends = {d.split()[0] for d in info.stdout.replace("\n", "").split(",")}
        self.assertIn("libssl3", depends)  # dlopened for rediss://: no linker sees it
        root = os.path.join(self.tmp, "root")
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        # Every shared library the binary loads comes with a package it depends on (not so
        # in sanitizer builds, whose runtimes are no dependency of the package we ship).
        ldd = subprocess.run(["ldd", os.path.join(root, "usr/bin/rlock")], capture_output=True,
                             text=True, check=True).stdout
        if os.environ.get("RLOCK_SANITIZE"):
            ldd = ""
        for lib in re.findall(r"=> (/\S+)", ldd):
            # dpkg knows a file by the path its package shipped (/lib or /usr/lib, merged /usr).
            paths = {lib, os.path.realpath(lib), lib.replace("/usr/lib/", "/lib/", 1)}
            owners = {subprocess.run(["dpkg", "-S", path], capture_output=True,
                                     text=True).stdout.split(":")[0] for path in paths} - {""}
            self.assertTrue(owners, f"no package owns {lib}")
            self.assertTrue(owners & depends, f"{lib} (from {owners}) is not in Depends: {depends}")
        for path in INSTALLED:
            self.assertTrue(os.path.isfile(os.path.join(root, "usr", path)), path)
        # Debian's checks of a package find nothing: a Maintainer with an address, a changelog,
        # man pages compressed, a description that fits.
        lintian = shutil.which("lintian")
        self.assertIsNotNone(lintian, "lintian is needed (packaging/setup-debian.sh)")
        r = subprocess.run([lintian, "--fail-on", "error,warning", deb], capture_output=True,
                           text=True)
        findings = [l for l in r.stdout.splitlines() if re.match(r"[EWIP]: ", l)]
        self.assertEqual((r.returncode, findings), (0, []), r.stderr)
        with open(os.path.join(root, "usr/share/doc/rlock/copyright")) as f:
            copyright = f.read()
        self.assertIn("\nLicense: MIT\n", copyright)
        self.assertIn("SPDX-License-Identifier: MIT", copyright)
        binary = os.path.join(root, "usr/bin/rlock")
        r = subprocess.run([binary, "--version"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"hiredis \d+\.\d+")
        self.assertIn("OpenSSL 3", r.stdout)  # libssl3 from the Depends loads
        # The package's version is the binary's; a build of a commit names it, and sorts after
        # the last release and before the next, so that apt upgrades an older build with it.
        version = r.stdout.split()[1]
        info = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True)
        self.assertEqual(info.stdout.strip(), version)
        self.assertEqual(subprocess.run(["dpkg", "--compare-versions", version, "gt", "0.1.0"]
                                        ).returncode, 0, version)
        source = os.environ.get("RLOCK_SOURCE_DIR", os.path.join(BUILD, ".."))
        if os.path.isdir(os.path.join(source, ".git")):
            head = subprocess.run(["git", "-C", source, "rev-parse", "--short=12", "HEAD"],
                                  capture_output=True, text=True, check=True).stdout.strip()
            tags = subprocess.run(["git", "-C", source, "tag", "--points-at", "HEAD"],
                                  capture_output=True, text=True, check=True).stdout.split()
            release = version.split("~")[0]
            if f"v{release}" in tags:
                self.assertEqual(version, release)
            else:  # a build between releases: never taken for the release
                self.assertRegex(version, rf"^\d+\.\d+\.\d+~dev\d+\+g{head}$")
                self.assertEqual(subprocess.run(["dpkg", "--compare-versions", version, "lt",
                                                 release]).returncode, 0, version)
        # The packaged binary takes a lock on a real server.
        server = RedisServer()
        self.addCleanup(server.stop)
        r = subprocess.run([binary, "run", "--redis", server.url, "k", "--", "sh", "-c",
                            "echo $RLOCK_FENCE"], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout), (0, server.cmd("GET", "{k}:rlock:fence") + "\n"),
                         r.stderr)
        # Stripped: a package is not the place for debug information.
        file_out = subprocess.run(["file", binary], capture_output=True, text=True).stdout
        if file_out:
            self.assertIn("stripped", file_out)
            self.assertNotIn("not stripped", file_out)


class Rpm(unittest.TestCase):
    def test_spec_builds_an_rpm_with_every_file(self):
        rpmbuild = shutil.which("rpmbuild")
        self.assertIsNotNone(rpmbuild, "rpmbuild is needed (Debian's rpm package)")
        source = os.environ.get("RLOCK_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
        top = tempfile.mkdtemp(prefix="rlock-rpm-")
        self.addCleanup(shutil.rmtree, top, True)
        os.makedirs(os.path.join(top, "SOURCES"))
        with open(os.path.join(source, "packaging/rpm/rlock.spec")) as f:
            version = next(l.split()[1] for l in f if l.startswith("Version:"))
        tarball = os.path.join(top, "SOURCES", f"rlock-{version}.tar.gz")
        subprocess.run(["git", "-C", source, "archive", "--format=tar.gz",
                        f"--prefix=rlock-{version}/", "-o", tarball, "HEAD"], check=True)
        # --nodeps: the BuildRequires name Fedora's packages; here Debian's are installed. The
        # build type None (no -O2 -g): the same files in the package, built in less time on a
        # runner that runs another suite beside it.
        r = subprocess.run([rpmbuild, "-bb", "--nodeps", "--define", f"_topdir {top}",
                            "--define", "debug_package %{nil}", "--define", "rlock_build_type None",
                            os.path.join(source, "packaging/rpm/rlock.spec")],
                           capture_output=True, text=True, timeout=840)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        rpms = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(top, "RPMS")) for f in fs]
        self.assertEqual(len(rpms), 1, rpms)
        files = subprocess.run(["rpm", "-qlp", rpms[0]], capture_output=True, text=True).stdout
        for path in INSTALLED:
            self.assertIn("/usr/" + path, files)
        # rpm 4.18 and later name the folder after the package, older ones add the version.
        self.assertRegex(files, r"/usr/share/licenses/rlock(-[\d.]+)?/LICENSE\n")
        info = subprocess.run(["rpm", "-qip", rpms[0]], capture_output=True, text=True).stdout
        self.assertRegex(info, r"License\s*: MIT\n")


if __name__ == "__main__":
    unittest.main()
