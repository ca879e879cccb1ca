#!/usr/bin/env bash
# Two devices, one memory, end to end: two roots, two Syncthing instances on
# 127.0.0.1 (generated keys; no global or local discovery, relays, NAT or
# usage reporting), two `memd serve`. Both write and forget concurrently for
# SYNC_TEST_SECONDS (default 20), then, once Syncthing has converged, both
# daemons must return identical search results for a fixed query set, with
# 0 lost, 0 duplicated and 0 conflict copies of journals.
# Needs `syncthing` (Debian: apt-get install -y syncthing) and a built memd
# (MEMD_BIN, default target/debug/memd). Exit 0 on success.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v syncthing >/dev/null || { echo "sync-test: syncthing is not installed" >&2; exit 2; }
MEMD_BIN="${MEMD_BIN:-${CARGO_TARGET_DIR:-target}/debug/memd}"
[ -x "$MEMD_BIN" ] || cargo build --quiet
MEMD_BIN="$(cd "$(dirname "$MEMD_BIN")" && pwd)/$(basename "$MEMD_BIN")"
export MEMD_BIN
export SYNC_TEST_SECONDS="${SYNC_TEST_SECONDS:-20}"
exec timeout 240 python3 - <<'PY'
import json, os, random, shutil, signal, socket, subprocess, sys, tempfile, threading, time, urllib.error, urllib.request

memd = os.environ["MEMD_BIN"]
seconds = int(os.environ["SYNC_TEST_SECONDS"])
tmp = tempfile.mkdtemp(prefix="memd-sync-test-")
procs = []

def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def http(method, url, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
        return json.loads(text) if text.strip() else None

def wait(pred, what, limit=60):
    end = time.time() + limit
    while time.time() < end:
        try:
            if pred():
                return
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit(f"sync-test: timed out waiting for {what}")

def cleanup():
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    if os.environ.get("SYNC_TEST_KEEP"):
        print("kept", tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)

class Device:
    def __init__(self, name):
        self.name = name
        self.root = os.path.join(tmp, name)
        self.st_home = os.path.join(tmp, name + "-syncthing")
        os.makedirs(os.path.join(self.root, "memories"))
        self.gui = port(); self.listen = port(); self.memd_port = port()
        self.key = "key-" + name + "-" + str(random.getrandbits(64))
        subprocess.run(["syncthing", "-generate=" + self.st_home], check=True, capture_output=True)
        env = dict(os.environ, STNODEFAULTFOLDER="1", STNOUPGRADE="1", HOME=self.st_home)
        self.st = subprocess.Popen(
            ["syncthing", "-home=" + self.st_home, "-no-browser", "-no-restart",
             "-gui-address=127.0.0.1:%d" % self.gui, "-gui-apikey=" + self.key],
            env=env, stdout=open(os.path.join(tmp, name + "-syncthing.log"), "w"), stderr=subprocess.STDOUT)
        procs.append(self.st)
        self.api = "http://127.0.0.1:%d" % self.gui
        wait(lambda: self.rest("GET", "/rest/system/ping"), "syncthing " + name)
        self.rest("PATCH", "/rest/config/options", {
            "listenAddresses": ["tcp://127.0.0.1:%d" % self.listen],
            "globalAnnounceEnabled": False, "localAnnounceEnabled": False,
            "relaysEnabled": False, "natEnabled": False, "urAccepted": -1,
            "crashReportingEnabled": False, "autoUpgradeIntervalH": 0,
            # Test machines run with little free disk; the test writes kilobytes.
            "minHomeDiskFree": {"value": 0, "unit": "%"},
        })
        try:
            self.rest("DELETE", "/rest/config/folders/default")
        except urllib.error.HTTPError:
            pass
        self.id = self.rest("GET", "/rest/system/status")["myID"]
        with open(os.path.join(self.root, "config.json"), "w") as f:
            json.dump({"listen": "127.0.0.1:%d" % self.memd_port, "device": name,
                       "sync": {"syncthingUrl": self.api, "syncthingApiKey": self.key}}, f)
        tok = subprocess.run([memd, "--root", self.root, "token", "issue", "--name", "t",
                              "--preset", "dsh-desktop", "--json"], check=True, capture_output=True)
        self.token = json.loads(tok.stdout)["secret"]

    def rest(self, method, path, body=None):
        return http(method, self.api + path, body, {"X-API-Key": self.key})

    def memd(self, *args):
        r = subprocess.run([memd, "--root", self.root, *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"sync-test: memd {' '.join(args)} failed: {r.stderr}")
        return r.stdout

    def serve(self):
        env = dict(os.environ, MEMD_MODELS_DIR=os.path.join(tmp, "no-models"))
        self.proc = subprocess.Popen([memd, "--root", self.root, "serve"], env=env,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(tmp, self.name + "-memd.log"), "w"))
        procs.append(self.proc)
        self.url = "http://127.0.0.1:%d" % self.memd_port
        wait(lambda: http("GET", self.url + "/v1/health"), "memd " + self.name)

    def call(self, path, body):
        return http("POST", self.url + path, body, {"Authorization": "Bearer " + self.token})

try:
    a, b = Device("alpha"), Device("beta")
    # Setup as a user does it: `memd sync init --peer <the other's id>` on each.
    a.memd("sync", "init", "--peer", b.id)
    b.memd("sync", "init", "--peer", a.id)
    # No discovery on loopback: tell each Syncthing where the other listens.
    a.rest("PATCH", "/rest/config/devices/" + b.id, {"addresses": ["tcp://127.0.0.1:%d" % b.listen]})
    b.rest("PATCH", "/rest/config/devices/" + a.id, {"addresses": ["tcp://127.0.0.1:%d" % a.listen]})
    for d, other in ((a, b), (b, a)):
        d.rest("PATCH", "/rest/config/folders/memd-memories", {"minDiskFree": {"value": 0, "unit": "%"}})
    for d in (a, b):
        d.serve()
    wait(lambda: a.rest("GET", "/rest/system/connections")["connections"][b.id]["connected"], "peers to connect")

    words = ["river", "lantern", "copper", "meadow", "harbour", "violet", "granite", "orchard"]
    written = {a.name: [], b.name: []}
    forgotten = {a.name: [], b.name: []}
    errors = []

    def work(d, other, seed):
        rng = random.Random(seed)
        end = time.time() + seconds
        n = 0
        while time.time() < end:
            n += 1
            w = rng.choice(words)
            try:
                r = d.call("/v1/write", {"text": f"{d.name} note {n} about the {w} and item{d.name}{n}", "stage": "long"})
                written[d.name].append(r["id"])
                if n % 4 == 0:
                    # Half the forgets hit the other device's memories (once synced here).
                    pool = written[other.name] if n % 8 == 0 and written[other.name] else written[d.name]
                    victim = rng.choice(pool)
                    if victim not in forgotten[a.name] and victim not in forgotten[b.name]:
                        try:
                            d.call("/v1/forget", {"id": victim})
                            forgotten[d.name].append(victim)
                        except urllib.error.HTTPError as e:
                            if e.code != 404:
                                raise
            except Exception as e:
                errors.append(f"{d.name}: {e}")
            time.sleep(0.05)

    threads = [threading.Thread(target=work, args=(a, b, 1)), threading.Thread(target=work, args=(b, a, 2))]
    for t in threads: t.start()
    for t in threads: t.join()
    if errors:
        raise SystemExit("sync-test: write errors: " + "; ".join(errors[:5]))

    gone = set(forgotten[a.name]) | set(forgotten[b.name])
    live = (set(written[a.name]) | set(written[b.name])) - gone

    def facts(d):
        return json.loads(d.memd("stats", "--json"))["facts"]
    def hidden(d, i):
        try:
            d.call("/v1/get", {"id": i})
            return False
        except urllib.error.HTTPError as e:
            return e.code == 404
    # Converged: both hold as many facts as are live, and neither still shows
    # a forgotten one (equal counts alone can hide a late forget behind a late put).
    def converged():
        return (facts(a) == len(live) and facts(b) == len(live)
                and all(hidden(d, i) for d in (a, b) for i in gone))
    wait(converged, f"both daemons to hold exactly the {len(live)} live facts", 120)

    queries = words + ["note", "item"]
    results = {}
    for d in (a, b):
        results[d.name] = [[h["id"] for h in d.call("/v1/search", {"query": q, "limit": 1000, "mode": "fulltext"})["hits"]] for q in queries]
    same = results[a.name] == results[b.name]
    def readable(d, i):
        try:
            d.call("/v1/get", {"id": i})
            return True
        except urllib.error.HTTPError:
            return False
    lost = dup = 0
    for d in (a, b):
        for ids in results[d.name]:
            dup += len(ids) - len(set(ids))
        found = set(i for ids in results[d.name] for i in ids)
        lost += sum(1 for i in live if not readable(d, i))
        back = [i for i in gone if readable(d, i)] + sorted(found & gone)
        if back:
            raise SystemExit(f"sync-test: {d.name} still shows forgotten memories: {back[:3]}")
    conflicts = [os.path.join(r, f) for d in (a, b) for r, _, fs in os.walk(os.path.join(d.root, "memories"))
                 for f in fs if ".sync-conflict-" in f]
    status = json.loads(a.memd("sync", "status", "--json"))
    print(f"sync-test: {sum(map(len, written.values()))} written, {len(gone)} forgotten, {len(live)} live; "
          f"identical results: {same}; lost {lost}; duplicated {dup}; conflict copies {len(conflicts)}; "
          f"alpha lines per device {status['lines_per_device']}")
    peers = status.get("peers") or []
    if not peers or not peers[0]["connected"]:
        raise SystemExit(f"sync-test: memd sync status does not show the connected peer: {status}")
    if not same or lost or dup or conflicts:
        raise SystemExit("sync-test: FAILED")
    print("sync-test: ok")
finally:
    cleanup()
PY
