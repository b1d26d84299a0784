"""`labkit workshop hub`: one machine serves the learner release to a room, each learner in their own browser.

A real JupyterHub (PyPI's `jupyterhub`, the `lab` extra) behind configurable-http-proxy (Debian's
`node-configurable-http-proxy`, which `make setup` installs as root; npm's `configurable-http-proxy` works too),
started by `Room.start` in a process group of its own and stopped by `Room.stop`:

* **Accounts.** Each learner is a Unix account (`labkit-learner-01` ..., or the names of a file), made by
  `useradd` with the comment `GECOS` (teardown removes only accounts that carry it), a home of mode 0700 holding
  their own copy of the release (`~/workshop`), so no learner reads another's files -- through the hub (a
  learner's cookie opens only their own server) or the file system.
* **Passwords.** One password per learner, generated, set with `chpasswd` and checked by JupyterHub's default
  PAMAuthenticator (the system's own login check; only the room's accounts are allowed).  Not a shared
  workshop password: with one, any learner could log in under another's name.  They are printed once and kept
  in `<state>/passwords.txt` (mode 0600) for the instructor.
* **Limits.** Threads: cores / learners (at least 1; `LABKIT_THREADS` wins), handed to each learner's server
  through the thread policy's `child_env` and `LABKIT_THREADS`, so the kernels' torch/numpy pools and labkit's
  own policy take the room's share.  Memory: each learner's server runs under `prlimit --as=<cap>`, an address
  space limit its kernels inherit: a cell that allocates beyond it gets `MemoryError`, the kernel lives on and
  nobody else notices.  The limit is per process (a notebook's 2 gloo ranks get it each), not a sum.
* **Idle culler.** `jupyterhub-idle-culler` runs as a hub service and stops servers idle for `idle_timeout` s
  (the learner's files stay; logging in again starts a fresh server).
* **Reaching the course's Python.** A learner's server runs this Python and imports labkit; when a folder on the
  way is closed to other accounts (pyenv under `/root`, mode 0700), the room grants search (`x`, no listing) on it to
  its own group only, with a POSIX ACL (`setfacl -m g:<group>:x`), records each grant in `<state>/acl.json` and
  removes exactly those entries when it stops (`setfacl -x`).  No chmod: while it lasts `ls -l` shows the ACL's
  mask in the group bits.
* **Stopping.** SIGTERM to the hub, which stops the learners' servers and the proxy; then whatever is left of
  the processes it started (they run in sessions of their own) and every process of a learner account is
  ended, so nothing outlives the room.  `teardown` also removes the accounts and their homes -- collect first.

`<state>/room.json` lists the room (learners, homes, the release, the address): `learner_notebooks(state)` gives
collecting its paths.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from labkit import procs, threads
from labkit.cli.errors import UsageError
from labkit.serving.process import ServerProcess

PREFIX = "labkit-learner-"
GECOS = "labkit workshop learner"  # the mark of an account the room made; teardown removes no other
RELEASE_DIR = "workshop"  # the release's copy in each learner's home
ROOM_FILE = "room.json"
PASSWORDS = "passwords.txt"
GRANTS = "acl.json"  # the search grants the room made on folders it does not own: removed at stop
NAME_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")  # a portable Unix user name (useradd's NAME_REGEX, lower case)
DEBIAN_NODE_MODULES = Path("/usr/share/nodejs")  # where Debian's node packages live
START_S = 90  # the hub and its proxy up and answering (the hub's first start creates its database)
# JupyterLab's settings for the room: a room is often offline, and news or update pop-ups only distract
LAB_SETTINGS = {"@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False}}


# ------------------------------------------------------------------------------------------------ the room's plan
def learner_names(learners: int = 0, names_file: str | Path | None = None) -> list[str]:
    """The room's account names: one per non-empty line of `names_file`, else `labkit-learner-01`..`NN`."""
    if names_file is not None:
        try:
            lines = Path(names_file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UsageError(f"--names {names_file}: cannot read it ({exc.strerror})") from None
        names = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        bad = [n for n in names if not NAME_RE.fullmatch(n)]
        if bad:
            raise UsageError(f"--names {names_file}: not a Unix user name: {bad[0]!r} (a-z, 0-9, _ and -, at most 32)")
        if len(set(names)) != len(names):
            raise UsageError(f"--names {names_file}: a name appears twice")
        if not names:
            raise UsageError(f"--names {names_file}: no names in it")
        return names
    if learners < 1:
        raise UsageError(f"--learners {learners}: a room needs at least 1 learner")
    width = max(2, len(str(learners)))
    return [f"{PREFIX}{i:0{width}d}" for i in range(1, learners + 1)]


def learner_threads(learners: int) -> int:
    """Compute threads for each learner: the cores this process may use / the learners, at least 1.

    `LABKIT_THREADS` (the thread policy's explicit setting) wins when it is set above 0."""
    override = threads.env_override()
    if override:
        return override
    return max(1, threads.cores() // max(1, learners))


def parse_size(text: str) -> int:
    """Bytes from `4G`, `1500M`, `512K` or a plain number of bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(text), re.IGNORECASE)
    if not m:
        raise UsageError(f"--memory {text!r}: give a size such as 4G or 1500M")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def default_memory(learners: int) -> int:
    """Each learner's cap when the instructor names none: 80 % of the machine's memory shared out, at least 1 GiB."""
    import psutil

    return max(2**30, int(psutil.virtual_memory().total * 0.8) // max(1, learners))


def learner_env(learners: int) -> dict[str, str]:
    """What each learner's server gets besides PATH and the locale: the thread policy for the room's share."""
    n = learner_threads(learners)
    env = threads.child_env(n, base={})
    env[threads.ENV_OVERRIDE] = str(n)  # labkit's own policy in the kernel (torch.set_num_threads) takes the share
    return env


# ------------------------------------------------------------------------------------------------ the accounts
@dataclass
class Learner:
    name: str
    home: Path
    uid: int
    password: str = ""  # only when the account was made now

    @property
    def release(self) -> Path:
        return self.home / RELEASE_DIR


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} ... failed ({r.returncode}): {r.stderr.strip()[:300]}")
    return r


def _ours(name: str) -> pwd.struct_passwd | None:
    """The account `name` if it exists and the room made it (its comment is `GECOS`); None if it does not exist."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    if entry.pw_gecos.split(",")[0] != GECOS:
        raise UsageError(f"the account {name!r} exists and is not a labkit learner's: choose other names")
    return entry


def _write_settings(home: Path, settings: dict) -> None:
    for plugin, values in settings.items():
        pkg, name = plugin.rsplit("/", 1)
        f = home / ".jupyter" / "lab" / "user-settings" / pkg / f"{name}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(values), encoding="utf-8")


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            os.chown(os.path.join(dirpath, n), uid, gid, follow_symlinks=False)


def room_group(state: str | Path) -> str:
    """The room's group (one per state folder): every learner is in it, and the room's search grants name it."""
    return "labkit-room-" + hashlib.sha256(str(Path(state).resolve()).encode()).hexdigest()[:8]


def ensure_group(name: str) -> int:
    """The gid of group `name`, made with `groupadd` if it does not exist."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        _run(["groupadd", name])
        return grp.getgrnam(name).gr_gid


def create_learners(
    names: list[str],
    release: str | Path,
    homes: str | Path = "/home",
    lab_settings: dict | None = None,
    group: str | None = None,
) -> list[Learner]:
    """Make (or find) each learner's account, home (0700) and copy of `release`; a new account gets a password.
    With `group` (it must exist), every learner is in it.

    An account the room made before keeps its home, work and password; one that is somebody else's stops the room."""
    if os.geteuid() != 0:
        raise UsageError("the room creates one Unix account per learner: run it as root (or in the course's container)")
    release = Path(release)
    if not (release / "notebooks").is_dir():
        raise UsageError(f"--release {release}: no notebooks/ in it (write one with `labkit course workshop --out`)")
    made = []
    for name in names:
        entry = _ours(name)
        password = ""
        if entry is None:
            home = Path(homes) / name
            _run(
                ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash", "--comment", GECOS, name]
            )
            password = secrets.token_urlsafe(9)
            _run(["chpasswd"], input=f"{name}:{password}\n")
            entry = pwd.getpwnam(name)
        if group and name not in grp.getgrnam(group).gr_mem:
            _run(["usermod", "--append", "--groups", group, name])
        home = Path(entry.pw_dir)
        os.chmod(home, 0o700)  # the line between learners: nobody but its owner (and root) enters
        learner = Learner(name, home, entry.pw_uid, password)
        if not learner.release.exists():
            shutil.copytree(release, learner.release, symlinks=False)
        _write_settings(home, {**LAB_SETTINGS, **(lab_settings or {})})
        _chown_tree(home, entry.pw_uid, entry.pw_gid)
        made.append(learner)
    return made


def processes_of(uids: set[int]) -> list:
    """The running processes owned by `uids` (psutil.Process objects)."""
    import psutil

    out = []
    for p in psutil.process_iter(["uids"]):
        try:
            if p.info["uids"] and p.info["uids"].real in uids and running(p):
                out.append(p)
        except psutil.Error:
            continue
    return out


def end_processes(ps: list, grace: float = 5.0) -> list[str]:
    """SIGTERM each of `ps`, wait up to `grace` s, SIGKILL the rest; returns those that were alive, each as
    "name[pid] user: command line" (what a report of a leak needs)."""
    import psutil

    alive = [p for p in ps if running(p)]
    shown = [_described(p) for p in alive]
    for p in alive:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, left = psutil.wait_procs(alive, timeout=grace)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=grace)
    return shown


def running(p) -> bool:
    """Whether psutil process `p` still runs.  A zombie does not: it has exited and waits for its parent to read
    its status -- a kernel whose server stopped first is reparented to PID 1, which in a container may reap late."""
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _described(p) -> str:
    import psutil

    try:
        with p.oneshot():
            return f"{p.name()}[{p.pid}] {p.username()}: {' '.join(p.cmdline())[:160]}"
    except psutil.Error:
        return f"[{p.pid}] (gone)"


def remove_learners(names: list[str]) -> list[str]:
    """End every process of the room's accounts among `names`, then remove them and their homes; returns the
    names removed.  An account without the room's mark is left alone."""
    removed = []
    for name in names:
        try:
            entry = _ours(name)
        except UsageError:
            continue
        if entry is None:
            continue
        end_processes(processes_of({entry.pw_uid}))
        _run(["userdel", "--remove", name])
        if Path(entry.pw_dir).exists():  # userdel leaves a home outside /home's mail spool conventions
            shutil.rmtree(entry.pw_dir, ignore_errors=True)
        removed.append(name)
    return removed


def check_installed() -> None:
    """JupyterHub and its idle culler are importable here, or one line says how to get them."""
    try:
        import jupyterhub  # noqa: F401
        import jupyterhub_idle_culler  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"the room needs {exc.name}: pip install -e '.[lab]' (`make setup` installs it)") from None


def learner_paths() -> list[Path]:
    """What a learner's server needs to reach: this Python (the venv's link and the interpreter it resolves to), its
    prefixes (the venv and the base installation) and labkit (a checkout or site-packages)."""
    import sysconfig

    import labkit

    return [
        Path(sys.executable),
        Path(sys.executable).resolve(),
        Path(sys.base_prefix),
        Path(sys.prefix),
        Path(sysconfig.get_paths()["purelib"]),
        Path(labkit.__file__).parent,
    ]


def folders_on_the_way(paths: list[Path]) -> list[Path]:
    """Every folder an account passes through to reach `paths` (and each of them that is a folder), outermost first;
    a link's own folders and its target's both count."""
    out: list[Path] = []
    for p in map(Path, map(os.path.abspath, paths)):
        for step in [*reversed(p.parents), p]:
            real = step.resolve()
            for d in [*reversed(real.parents), real]:
                if d not in out and d.is_dir():
                    out.append(d)
    return out


def first_closed(folders: list[Path], user: str) -> Path | None:
    """The first of `folders` (outermost first) that `user` cannot pass through, as the kernel decides it for
    that account (mode bits and ACLs), or None."""
    script = 'for d do test -x "$d" || { printf %s "$d"; exit 0; }; done'
    r = _run(["runuser", "-u", user, "--", "sh", "-c", script, "sh", *map(str, folders)], cwd="/")
    return Path(r.stdout) if r.stdout else None


def _acl(folder: Path) -> list[str]:
    """`folder`'s ACL entries (`getfacl`, numeric ids, no comments)."""
    r = _run(["getfacl", "--omit-header", "--numeric", "--no-effective", "--absolute-names", str(folder)])
    return [line for line in r.stdout.splitlines() if line and not line.startswith("#")]


def _mask(folder: Path) -> str | None:
    return next((e.split(":")[2] for e in _acl(folder) if e.startswith("mask:")), None)


def grant_search(folder: Path, gid: int) -> dict:
    """Let group `gid` pass through `folder` (search, no listing) with a POSIX ACL entry; returns the record that
    `revoke_search` undoes it from (the ACL's mask before, None on a plain-mode folder)."""
    if shutil.which("setfacl") is None:
        raise UsageError(
            f"{folder} lets no learner through to {sys.executable}, and setfacl is missing: "
            "as root `apt-get install acl` (`make setup` does)"
        )
    mask = _mask(folder)
    if mask is None:  # a plain mode: setfacl makes the mask the group bits plus x, no other entry to widen
        cmd = ["setfacl", "--modify", f"g:{gid}:x", str(folder)]
    else:  # keep the mask as it was, plus x: named entries it masked stay masked but for search
        cmd = ["setfacl", "--no-mask", "--modify", f"g:{gid}:x,m::{mask[:2]}x", str(folder)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 and "not supported" in r.stderr:
        raise UsageError(
            f"{folder} lets no learner through to {sys.executable}, and its file system has no POSIX ACLs to open "
            f"it to the room's group alone: mount it with ACLs (ext4 and xfs have them; the `acl` mount option), "
            "or install the course with a Python outside it"
        )
    if r.returncode != 0:
        raise RuntimeError(f"setfacl {folder} failed ({r.returncode}): {r.stderr.strip()[:300]}")
    return {"path": str(folder), "gid": gid, "mask": mask}


def revoke_search(grant: dict) -> None:
    """Remove the entry `grant_search` added and put the mask back as it was (none, on a plain-mode folder)."""
    folder = Path(grant["path"])
    if not folder.exists():
        return
    _run(["setfacl", "--no-mask", "--remove", f"g:{grant['gid']}", str(folder)])
    if grant["mask"] is not None:
        _run(["setfacl", "--no-mask", "--modify", f"m::{grant['mask']}", str(folder)])
    elif not [e for e in _acl(folder) if re.match(r"(user|group):[^:]+:", e)]:
        _run(["setfacl", "--remove", "m::", str(folder)])  # no named entry left: the plain mode it had


def read_grants(state: str | Path) -> list[dict]:
    path = Path(state) / GRANTS
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


def open_the_way(state: str | Path, user: str, gid: int, paths: list[Path] | None = None) -> list[dict]:
    """Grant group `gid` search on each folder on the way to `paths` (default `learner_paths()`) that `user` (a
    member) cannot pass, outermost first; each grant is recorded in `<state>/acl.json` as it is made.  Returns the
    grants made now."""
    from labkit.atomic import atomic_write_text

    folders = folders_on_the_way(paths if paths is not None else learner_paths())
    made: list[dict] = []
    while (closed := first_closed(folders, user)) is not None:
        if any(g["path"] == str(closed) for g in made):
            raise RuntimeError(f"{closed}: {user} still cannot pass through it after the ACL grant")
        made.append(grant_search(closed, gid))
        atomic_write_text(Path(state) / GRANTS, json.dumps(read_grants(state) + made[-1:], indent=2) + "\n")
    return made


def close_the_way(state: str | Path) -> list[str]:
    """Undo every grant recorded in `<state>/acl.json` (innermost first), then forget them; returns their folders."""
    grants = read_grants(state)
    for grant in reversed(grants):
        revoke_search(grant)
    (Path(state) / GRANTS).unlink(missing_ok=True)
    return [g["path"] for g in grants]


def check_learner_can_run(learner: str) -> None:
    """The learner's account can start this Python and import labkit and JupyterHub, or one line says why not.

    Run after `open_the_way`: what is left is a file itself closed to other accounts (a checkout or venv made with
    umask 077), which the room does not open."""
    r = subprocess.run(
        ["runuser", "-u", learner, "--", sys.executable, "-c", "import labkit, jupyterhub"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    if r.returncode == 0:
        return
    why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    raise UsageError(
        f"the learners' accounts cannot run {sys.executable} ({why}): the course's Python, venv and checkout "
        "must be readable by every account (`chmod -R a+rX` on the venv and the checkout)"
    )


# ------------------------------------------------------------------------------------------------ the hub
def find_proxy() -> tuple[str, dict[str, str]]:
    """configurable-http-proxy's path and the environment it needs (Debian's package under another node)."""
    chp = shutil.which("configurable-http-proxy")
    if not chp:
        raise UsageError(
            "configurable-http-proxy is not installed: as root `apt-get install node-configurable-http-proxy` "
            "(`make setup` does), or `npm install -g configurable-http-proxy`"
        )
    env = {}
    if str(Path(chp).resolve()).startswith(str(DEBIAN_NODE_MODULES)):
        # Debian's node looks there by itself; NodeSource's or nvm's node does not
        env["NODE_PATH"] = os.pathsep.join(filter(None, [str(DEBIAN_NODE_MODULES), os.environ.get("NODE_PATH")]))
    return chp, env


def hub_config(
    *,
    state: Path,
    names: list[str],
    ip: str,
    port: int,
    hub_port: int,
    api_port: int,
    proxy: str,
    memory: int,
    learners: int,
    idle_timeout: int,
) -> str:
    """The hub's `jupyterhub_config.py`: plain settings, each one documented by JupyterHub."""
    bin_dir = Path(sys.executable).parent
    settings = {
        "JupyterHub.bind_url": f"http://{ip}:{port}",
        "JupyterHub.hub_ip": procs.LOOPBACK,
        "JupyterHub.hub_port": hub_port,
        "JupyterHub.db_url": f"sqlite:///{state / 'jupyterhub.sqlite'}",
        "JupyterHub.cookie_secret_file": str(state / "jupyterhub_cookie_secret"),
        "JupyterHub.cleanup_servers": True,
        "JupyterHub.cleanup_proxy": True,
        "ConfigurableHTTPProxy.command": [proxy],
        "ConfigurableHTTPProxy.api_url": f"http://{procs.LOOPBACK}:{api_port}",
        "ConfigurableHTTPProxy.pid_file": str(state / "proxy.pid"),
        "JupyterHub.authenticator_class": "pam",
        "Authenticator.allowed_users": sorted(names),
        "PAMAuthenticator.open_sessions": False,
        "JupyterHub.spawner_class": "localprocess",
        # the address space cap, inherited by every kernel the server starts (util-linux's prlimit, then exec)
        "Spawner.cmd": ["prlimit", f"--as={memory}", "--", str(bin_dir / "jupyterhub-singleuser")],
        "Spawner.notebook_dir": f"~/{RELEASE_DIR}",
        "Spawner.default_url": "/lab",
        "Spawner.env_keep": ["LANG", "LC_ALL"],
        "Spawner.environment": {
            "PATH": os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"]),
            **learner_env(learners),
        },
        "Spawner.start_timeout": 180,  # a busy room's first kernels: imports on shared cores
        "Spawner.http_timeout": 120,
        # stopping: SIGINT lets a learner's server shut its kernels down (5 s each, jupyter_client's wait) before
        # SIGTERM/SIGKILL; JupyterHub's 10 s was too short on a loaded machine (CI: 2 kernels outlived a killed server)
        "Spawner.interrupt_timeout": 30,
        "Spawner.term_timeout": 10,
        "JupyterHub.services": [
            {
                "name": "idle-culler",
                "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={idle_timeout}"],
            }
        ],
        "JupyterHub.load_roles": [
            {
                "name": "idle-culler",
                "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
                "services": ["idle-culler"],
            }
        ],
    }
    lines = [
        "# written by `labkit workshop hub` (labkit.classroom.hub); rewritten at each start",
        "c = get_config()  # noqa",
    ]
    for key, value in settings.items():
        if key == "Authenticator.allowed_users":
            lines.append(f"c.{key} = set({value!r})")
        else:
            lines.append(f"c.{key} = {value!r}")
    return "\n".join(lines) + "\n"


@dataclass
class Room:
    """A running room: the hub process and what it needs to be stopped cleanly."""

    state: Path
    url: str
    learners: list[Learner]
    server: ServerProcess | None = None  # the hub, in a process group of its own
    started_s: float = 0.0  # seconds from `start` until the hub answered
    seen: list = field(default_factory=list)  # the hub's descendants, as last seen while it ran

    def descendants(self) -> list:
        """The processes the hub started (the proxy, the culler, the learners' servers and kernels), noted so that
        `stop` ends them even though they run in sessions of their own."""
        import psutil

        try:
            kids = psutil.Process(self.server.proc.pid).children(recursive=True)
        except psutil.Error:
            kids = []
        known = {p.pid for p in self.seen}
        self.seen += [p for p in kids if p.pid not in known]
        return kids

    def stop(self, grace: float = 60.0) -> dict:
        """Stop the hub (it stops the learners' servers and the proxy), then end whatever the room left running.

        Then the room's search grants are removed (`close_the_way`).  Returns what was left and undone:
        {"left_by_hub": [the processes the hub did not stop], "learner_processes": [those of the learners' accounts
        left after that], "grants_removed": k folders} -- each process as `end_processes` describes it."""
        if self.server is None:
            return {"left_by_hub": [], "learner_processes": [], "grants_removed": 0}
        if self.server.alive():
            self.descendants()
        self.server.stop(grace=grace)
        left = end_processes(self.seen)
        stray = end_processes(processes_of({learner.uid for learner in self.learners}))
        self.server = None
        return {"left_by_hub": left, "learner_processes": stray, "grants_removed": len(close_the_way(self.state))}

    def __enter__(self) -> "Room":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _write_room(state: Path, room: dict) -> None:
    from labkit.atomic import atomic_write_text

    atomic_write_text(state / ROOM_FILE, json.dumps(room, indent=2) + "\n")


def read_room(state: str | Path) -> dict:
    path = Path(state) / ROOM_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: no room here ({exc.__class__.__name__}); start one with `labkit workshop hub`")


def learner_notebooks(state: str | Path) -> dict[str, Path]:
    """Each learner's notebooks folder (`<home>/workshop/notebooks`), by account name: what collecting copies."""
    return {entry["name"]: Path(entry["home"]) / RELEASE_DIR / "notebooks" for entry in read_room(state)["learners"]}


def start(
    release: str | Path,
    state: str | Path,
    names: list[str],
    *,
    ip: str = procs.LOOPBACK,
    port: int = 8000,
    memory: int | None = None,
    idle_timeout: int = 3600,
    homes: str | Path = "/home",
    lab_settings: dict | None = None,
) -> Room:
    """Make the learners' accounts (see `create_learners`), start the hub on `ip`:`port` and wait until it
    answers; returns the running `Room` (stop it with `Room.stop`, or use it as a context manager)."""
    state = Path(state).resolve()
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o700)  # the hub's database, cookie secret and the passwords
    check_installed()
    proxy, proxy_env = find_proxy()
    if shutil.which("prlimit") is None:
        raise UsageError("prlimit (util-linux) is missing: the room caps each learner's memory with it")
    memory = memory or default_memory(len(names))
    close_the_way(state)  # a room stopped uncleanly (killed) left its grants: the way is opened afresh below
    group = room_group(state)
    gid = ensure_group(group)
    learners = create_learners(names, release, homes, lab_settings, group=group)
    try:
        open_the_way(state, learners[0].name, gid)
        check_learner_can_run(learners[0].name)
        new = [learner for learner in learners if learner.password]
        if new:
            with open(state / PASSWORDS, "a", encoding="utf-8") as f:
                os.fchmod(f.fileno(), 0o600)
                f.writelines(f"{learner.name}\t{learner.password}\n" for learner in new)
        port = port or procs.free_port(ip)
        hub_port, api_port = procs.free_ports(2)
        # the hub is reached on `ip`; on every interface (0.0.0.0) this machine reaches it on loopback
        url = f"http://{procs.LOOPBACK if ip in ('0.0.0.0', '') else ip}:{port}"
        config = state / "jupyterhub_config.py"
        config.write_text(
            hub_config(
                state=state,
                names=names,
                ip=ip,
                port=port,
                hub_port=hub_port,
                api_port=api_port,
                proxy=proxy,
                memory=memory,
                learners=len(names),
                idle_timeout=idle_timeout,
            ),
            encoding="utf-8",
        )
        _write_room(
            state,
            {
                "url": url,
                "release": str(Path(release).resolve()),
                "memory_bytes": memory,
                "threads": learner_threads(len(names)),
                "group": group,
                "learners": [{"name": x.name, "home": str(x.home), "uid": x.uid} for x in learners],
            },
        )
        env = {**os.environ, **proxy_env, "PYTHONUNBUFFERED": "1"}
        server = ServerProcess(
            [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(config)],
            f"{url}/hub/login",
            timeout=START_S,
            name="jupyterhub",
            log_path=state / "hub.log",
            env=env,
        ).start()  # raises with the log's tail if the hub exits or does not answer in time
        room = Room(state, url, learners, server, started_s=server.startup_s)
        room.descendants()
    except BaseException:
        close_the_way(state)  # a room that did not open leaves no folder opened
        raise
    return room


def teardown(state: str | Path) -> list[str]:
    """Remove the room's search grants (left if it was killed), accounts and homes (after collecting!), its group
    and the passwords file; returns the names removed."""
    room = read_room(state)
    close_the_way(state)
    removed = remove_learners([entry["name"] for entry in room["learners"]])
    group = room.get("group")
    if group and group == room_group(state):  # the group this room made, by its name; userdel left it empty
        try:
            grp.getgrnam(group)
        except KeyError:
            pass
        else:
            _run(["groupdel", group])
    (Path(state) / PASSWORDS).unlink(missing_ok=True)
    return removed


def wait_forever(room: Room) -> None:
    """Serve until Ctrl-C or SIGTERM, then stop the room."""
    stop = {"now": False}

    def _handler(signum, frame):
        stop["now"] = True

    old = signal.signal(signal.SIGTERM, _handler)
    try:
        while not stop["now"] and room.server is not None and room.server.alive():
            room.descendants()
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        room.stop()


# ------------------------------------------------------------------------------------------------ the command
DEFAULT_STATE = Path.home() / "labkit-room"


def register(wsub) -> None:
    """`labkit workshop hub` (labkit.classroom.cli registers it with the other `workshop` actions)."""
    from labkit.cli.errors import positive_int
    from labkit.cli.options import add_language_option

    h = wsub.add_parser(
        "hub",
        help="serve the learner release to a room: a JupyterHub, one Unix account and password per learner",
        description="Start a JupyterHub serving the learner release: one account, home (0700) and copy of the "
        "release per learner, a password each (printed once, kept in STATE/passwords.txt), an idle culler, "
        "threads = cores / learners and a memory cap per learner. Ctrl-C stops it; --teardown removes the accounts.",
    )
    who = h.add_mutually_exclusive_group()
    who.add_argument("--learners", type=positive_int, default=None, help="accounts labkit-learner-01..NN")
    who.add_argument("--names", type=Path, default=None, help="a file with one account name per line")
    h.add_argument("--release", type=Path, default=None, help="the learner release (default: written into STATE)")
    add_language_option(h, "the edition of the release written when --release is not given")
    h.add_argument("--state", type=Path, default=DEFAULT_STATE, help=f"the room's folder (default {DEFAULT_STATE})")
    h.add_argument(
        "--ip",
        default=procs.LOOPBACK,
        help="the interface to serve on (default loopback; the room's network interface address, or 0.0.0.0 for all)",
    )
    h.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0: any free one)")
    h.add_argument(
        "--memory",
        default=None,
        metavar="SIZE",
        help="each learner's memory cap, e.g. 4G (default: 80%% of this machine's memory / learners)",
    )
    h.add_argument(
        "--idle-timeout", type=positive_int, default=3600, help="stop a server idle this long, s (default 3600)"
    )
    h.add_argument("--teardown", action="store_true", help="remove the room's accounts and homes (collect first)")
    h.set_defaults(func=_cmd_hub)


def _release(args, state: Path) -> Path:
    if args.release:
        return args.release
    from labkit.classroom.release import write_release
    from labkit.course.discovery import discover, edition_notebooks

    try:
        infos = discover(edition_notebooks(args.lang) if args.lang else None)
    except FileNotFoundError as exc:
        raise UsageError(f"{exc}; or pass --release DIR (a folder `labkit course workshop --out` wrote)") from None
    out = state / "release"
    write_release(out, [info.path for info in infos], language=args.lang)
    return out


def _cmd_hub(args) -> int:
    state = args.state.resolve()
    if args.teardown:
        removed = teardown(state)
        print(f"removed {len(removed)} learner account(s) and their homes: {', '.join(removed) or '-'}")
        return 0
    if args.learners is None and args.names is None:
        raise UsageError("say who is in the room: --learners N or --names FILE")
    names = learner_names(args.learners or 0, args.names)
    state.mkdir(parents=True, exist_ok=True)
    memory = parse_size(args.memory) if args.memory else None
    room = start(
        _release(args, state), state, names, ip=args.ip, port=args.port, memory=memory, idle_timeout=args.idle_timeout
    )
    info = read_room(state)
    print(f"the room is open: {room.url} (hub up in {room.started_s:.1f} s; state {state})")
    print(
        f"{len(names)} learner(s): {info['threads']} thread(s) each, memory cap "
        f"{info['memory_bytes'] / 2**30:.1f} GiB per process, idle servers stopped after {args.idle_timeout} s"
    )
    new = [x for x in room.learners if x.password]
    if new:
        print("passwords (shown once; kept in " + str(state / PASSWORDS) + ", mode 0600):")
        for x in new:
            print(f"  {x.name}\t{x.password}")
    if len(new) < len(room.learners):
        print(f"{len(room.learners) - len(new)} account(s) existed already: their passwords are in {state / PASSWORDS}")
    print(
        f"Ctrl-C stops the room. Then: labkit workshop collect --room {state} --out submissions/; "
        f"labkit workshop hub --state {state} --teardown"
    )
    wait_forever(room)
    print("the room is closed: the hub, the proxy and every learner's process stopped")
    return 0
