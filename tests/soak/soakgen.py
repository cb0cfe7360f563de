"""The soak's operations, from a seed (tests/soak/soak.py runs them).

Python 3 standard library only. The same seed gives the same list of operations, whatever
happens while they run: every choice (guest, vCPU, set, load, how long to hold) is made here,
from random.Random(seed) alone, so any run can be replayed with `soak.py --seed SEED`.

    import soakgen
    for step, op in enumerate(soakgen.operations(seed)):   # endless
        ...
    soakgen.generate(seed, 100)                             # the first 100, a list

An operation is a dict: {"kind": KIND, ...its parameters...}. The guests are GUESTS below; the
host's CPUs are 0 and 1 (partitions CPU 0 | CPU 1, as the integration tests use).
"""
import random

# The guests, with and without their own pins. Sets are cpulists of CPUs 0-1.
#   pin     a partial <vcpupin> (vCPU 0 on CPU 0), preferred 1, persistent (managedsave)
#   cpuset  <vcpu cpuset='1'>, preferred auto, transient
#   io      <emulatorpin> 0, one I/O thread with <iothreadpin> 1, preferred 0, transient
#   bare    no metadata at all (managed with the config's defaults), persistent
GUESTS = [
    {"label": "pin", "vcpus": 2, "vcpupins": {0: "0"}, "preferred": "1", "persistent": True},
    {"label": "cpuset", "vcpus": 2, "cpuset": "1", "preferred": "auto", "persistent": False},
    {"label": "io", "vcpus": 1, "emulatorpin": "0", "iothreads": 1, "iothreadpins": {1: "1"},
     "preferred": "0", "persistent": False},
    {"label": "bare", "vcpus": 2, "persistent": True},
]

SETS = ["0", "1", "0-1"]

# kind: weight. Each operation leaves every guest running and softaffd up when it ends.
WEIGHTS = {
    "load": 12,            # a guest's load: n spinning threads
    "spike": 6,            # a load burst held a short time, then the load before
    "save-restore": 3,     # virsh save + restore
    "managedsave-start": 3,  # virsh managedsave + start (persistent guests)
    "destroy-start": 3,    # virsh destroy + start (or create again)
    "suspend-resume": 4,   # virsh suspend, hold, resume
    "sigstop-qemu": 4,     # SIGSTOP the QEMU process, hold, SIGCONT
    "vcpupin": 8,          # the user's live vcpupin
    "emulatorpin": 4,      # the user's live emulatorpin
    "iothreadpin": 3,      # the user's live iothreadpin (guests with I/O threads)
    "ctl-set": 6,          # softaffctl set --live: mode, preferred or softness
    "sighup": 3,           # softaffd reloads its config
    "kill-restart": 2,     # SIGKILL softaffd, start it again
    "term-restart": 3,     # SIGTERM softaffd (the give-back is checked), maybe a save/restore
                           # while it is down, start it again
    "libvirtd-restart": 1,  # libvirtd stops and starts; softaffd reconnects
    "inspect": 4,          # definitions, and a migration's XML through the hook's rewrite
    "idle": 5,             # nothing: time passes, the invariants are sampled
}


def guest(label):
    return next(g for g in GUESTS if g["label"] == label)


def _pick_guest(rng, pred=None):
    gs = [g for g in GUESTS if pred is None or pred(g)]
    return rng.choice(gs)["label"]


def _op(rng, kind):
    hold = round(rng.uniform(0.2, 3.0), 2)
    if kind == "load":
        g = _pick_guest(rng)
        return {"guest": g, "threads": rng.randint(0, guest(g)["vcpus"])}
    if kind == "spike":
        g = _pick_guest(rng)
        return {"guest": g, "threads": guest(g)["vcpus"], "hold": round(rng.uniform(0.3, 2.0), 2)}
    if kind in ("save-restore", "destroy-start", "inspect"):
        return {"guest": _pick_guest(rng)}
    if kind == "managedsave-start":
        return {"guest": _pick_guest(rng, lambda g: g["persistent"])}
    if kind in ("suspend-resume", "sigstop-qemu"):
        return {"guest": _pick_guest(rng), "hold": hold}
    if kind == "vcpupin":
        g = _pick_guest(rng)
        return {"guest": g, "vcpu": rng.randrange(guest(g)["vcpus"]), "cpus": rng.choice(SETS)}
    if kind == "emulatorpin":
        return {"guest": _pick_guest(rng), "cpus": rng.choice(SETS)}
    if kind == "iothreadpin":
        g = _pick_guest(rng, lambda g: g.get("iothreads"))
        return {"guest": g, "iothread": rng.randint(1, guest(g)["iothreads"]),
                "cpus": rng.choice(SETS)}
    if kind == "ctl-set":
        g = _pick_guest(rng)
        what = rng.choice(["mode", "preferred", "softness"])
        value = {"mode": lambda: rng.choice(["soft", "strict", "off"]),
                 "preferred": lambda: rng.choice(["0", "1", "auto"]),
                 "softness": lambda: str(rng.choice([0, 30, 50, 80, 100]))}[what]()
        return {"guest": g, "what": what, "value": value}
    if kind == "term-restart":
        down = rng.random() < 0.5
        return {"save_guest": _pick_guest(rng) if down else None}
    if kind == "idle":
        return {"hold": hold}
    return {}


def operations(seed):
    """The endless list of operations of seed."""
    rng = random.Random(seed)
    kinds = sorted(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]
    while True:
        kind = rng.choices(kinds, weights)[0]
        op = {"kind": kind}
        op.update(_op(rng, kind))
        op["gap"] = round(rng.uniform(0.1, 1.5), 2)  # the pause after it
        yield op


def generate(seed, n):
    """The first n operations of seed, a list."""
    out = []
    for op in operations(seed):
        if len(out) == n:
            break
        out.append(op)
    return out


def describe(op):
    """One line for the log."""
    rest = " ".join("%s=%s" % (k, op[k]) for k in sorted(op) if k not in ("kind", "gap"))
    return ("%s %s" % (op["kind"], rest)).strip()
