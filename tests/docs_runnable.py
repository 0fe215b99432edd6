#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run every command the docs print, as written (issue 26 item 3).

Usage: docs_runnable.py SOURCE_ROOT BUILD_ROOT [FILE.md...]
(default: README.md and every docs/*.md).

A fenced block is given a role by an HTML comment on the line before it:

  <!-- file NAME -->      the block's text is the file NAME (an input the
                          commands after it read: a rule file, a trace, an
                          nginx.conf)
  <!-- run -->            a shell block to run, in order, with bash -e -o pipefail
  <!-- not run: WHY -->   a shell block this test does not run, and why
                          (a build or install of the tree, minutes of
                          benchmarks, the demo itself)

Every ```sh block must carry `run` or `not run`: a new command cannot be
left out without a word.  Each document runs in its own empty directory,
its files written as they appear; `sluice` and `sluice-sim` are this
build's, first on PATH, as after `meson install`.  Two spellings are made
concrete, and only these: the placeholder module path
/path/to/build/nginx/ngx_http_sluice_module.so becomes this build's, and
127.0.0.1:8080 a free port (so the test runs beside anything).  Each block
has 60 s.  After a block that failed, and after each document, an nginx a
block left running (its nginx.pid in the directory) is stopped by that pid.  Documents needing the
nginx module are skipped, and said, where this build has none; the run
fails when it skips everything (exit 77 is meson's "skipped" only when no
document could run).
"""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

MODULE_PLACEHOLDER = "/path/to/build/nginx/ngx_http_sluice_module.so"
PORT_SPELLING = "127.0.0.1:8080"
MARK = re.compile(r"^<!--\s*(file\s+(\S+)|run|not run:\s*(.+?))\s*-->\s*$")


def blocks(path):
    """(line, lang, role, name, text) for every fenced block, role from the
    comment on the line before it (None when there is none)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\S*)", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        role = name = None
        mk = MARK.match(lines[i - 1].strip()) if i > 0 else None
        if mk:
            if mk.group(2):
                role, name = "file", mk.group(2)
            elif mk.group(1) == "run":
                role = "run"
            else:
                role = "not run"
        out.append((i + 1, m.group(1), role, name, "\n".join(lines[i + 1:j]) + "\n"))
        i = j + 1
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_nginx(d):
    pidfile = os.path.join(d, "nginx.pid")
    try:
        pid = int(open(pidfile).read())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGQUIT)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main():
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    docs = sys.argv[3:] or [os.path.join(src, "README.md")] + sorted(
        glob.glob(os.path.join(src, "docs", "*.md")))
    module = os.path.join(build, "nginx", "ngx_http_sluice_module.so")
    bindir = tempfile.mkdtemp(prefix="sluice-docs-bin-")
    for name, rel in (("sluice", "rules/sluice"), ("sluice-sim", "tools/sluice-sim")):
        if os.path.exists(os.path.join(build, rel)):
            os.symlink(os.path.join(build, rel), os.path.join(bindir, name))
    env = dict(os.environ)
    env["PATH"] = bindir + ":" + env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    ran = failed = skipped = 0
    for doc in docs:
        rel = os.path.relpath(doc, src)
        bl = blocks(doc)
        for line, lang, role, _, _ in bl:
            if lang in ("sh", "bash", "shell") and role not in ("run", "not run"):
                print("%s:%d: a shell block with neither <!-- run --> nor "
                      "<!-- not run: WHY --> before it" % (rel, line))
                failed += 1
        todo = [b for b in bl if b[2] in ("file", "run")]
        if not any(b[2] == "run" for b in todo):
            continue
        if any(MODULE_PLACEHOLDER in b[4] for b in todo) and not os.path.exists(module):
            print("%s: skipped: needs the nginx module, which this build has none of "
                  "(-Dnginx=enabled)" % rel)
            skipped += 1
            continue
        port = str(free_port())
        d = tempfile.mkdtemp(prefix="sluice-docs-")
        os.chmod(d, 0o755)  # as a user's directory: nginx's workers read html/ in it
        try:
            for line, lang, role, name, text in todo:
                text = text.replace(MODULE_PLACEHOLDER, module)
                text = text.replace(PORT_SPELLING, "127.0.0.1:" + port)
                if role == "file":
                    with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                        f.write(text)
                    continue
                try:
                    p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=d,
                                       env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, timeout=60)
                    rc, out = p.returncode, p.stdout.decode(errors="replace")
                except subprocess.TimeoutExpired as e:
                    rc, out = "timeout (60 s)", (e.stdout or b"").decode(errors="replace")
                ran += 1
                if rc != 0:
                    stop_nginx(d)  # a block that failed before its own kill
                    failed += 1
                    print("%s:%d: the block failed (exit %s):\n%s\n--- its output:\n%s" %
                          (rel, line, rc, text, out[-3000:]))
                else:
                    print("%s:%d: ok" % (rel, line))
        finally:
            stop_nginx(d)
            shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(bindir, ignore_errors=True)
    print("docs_runnable: %d blocks run, %d failed, %d documents skipped" % (ran, failed, skipped))
    if failed:
        return 1
    return 77 if ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
