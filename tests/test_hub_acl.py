"""The room's way to the course's Python: search grants by POSIX ACL to its group, recorded and removed exactly.

Real `setfacl` on real folders (a 0700 temp folder, as pyenv's `/root` is), a real group and a real account in it,
the kernel's own answer (`runuser ... test -x` / `cat`) for who passes.  Needs root (accounts, groups, `runuser`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="makes a group and an account: run as root (CI does)")


def _acl(folder: Path) -> str:
    return subprocess.run(["getfacl", "-cpn", str(folder)], capture_output=True, text=True, check=True).stdout


def _as(user: str, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, text=True, cwd="/")


@pytest.fixture
def member():
    """A group and an account in it (besides its own group), as the room makes its learners; removed after."""
    if shutil.which("setfacl") is None:
        pytest.fail("setfacl is missing: as root `apt-get install acl` (`make setup`'s hubacl target does)")
    from labkit.classroom import hub

    name = f"lkt{secrets.token_hex(3)}"
    gid = hub.ensure_group(name + "g")
    subprocess.run(["useradd", "--no-create-home", "--groups", name + "g", name], check=True)
    try:
        yield name, gid
    finally:
        subprocess.run(["userdel", name], check=False)
        subprocess.run(["groupdel", name + "g"], check=False)


def test_grants_open_only_the_closed_folders_to_the_group_and_are_removed_exactly(member):
    from labkit.classroom import hub

    user, gid = member
    base = Path(tempfile.mkdtemp(prefix="labkit-acl-"))  # mode 0700, like /root
    state = base.with_name(base.name + "-state")
    try:
        shut = base / "open" / "shut"
        shut.mkdir(parents=True)
        os.chmod(base / "open", 0o755)
        os.chmod(shut, 0o700)
        (shut / "python").write_text("the interpreter\n")
        os.chmod(shut / "python", 0o755)
        # an ACL already there (a named entry and its mask): the grant must hand it back as it was
        subprocess.run(["setfacl", "-m", "u:nobody:r", str(shut)], check=True)
        before = {d: (_acl(d), d.stat().st_mode) for d in (base, base / "open", shut)}
        assert oct(base.stat().st_mode & 0o777) == "0o700"

        folders = hub.folders_on_the_way([shut / "python"])
        assert folders[-3:] == [base, base / "open", shut] and folders[0] == Path("/")
        assert hub.first_closed(folders, user) == base
        assert _as(user, "cat", str(shut / "python")).returncode != 0

        state.mkdir()
        grants = hub.open_the_way(state, user, gid, [shut / "python"])
        assert [g["path"] for g in grants] == [str(base), str(shut)]  # outermost first; `open` needed nothing
        assert [g["mask"] for g in grants] == [None, "r--"]
        assert hub.read_grants(state) == grants
        assert _as(user, "cat", str(shut / "python")).stdout == "the interpreter\n"
        listing = _as(user, "ls", str(base))
        assert listing.returncode != 0 and "Permission denied" in listing.stderr  # search only, no listing
        assert f"group:{gid}:--x" in _acl(base) and f"group:{gid}:--x" in _acl(shut)
        assert "user:65534:r--" in _acl(shut)  # the entry that was there stays
        assert _as("nobody", "cat", str(shut / "python")).returncode != 0  # not the room's group: still closed
        assert hub.open_the_way(state, user, gid, [shut / "python"]) == []  # open already: nothing more granted

        assert hub.close_the_way(state) == [str(base), str(shut)]
        assert not (state / hub.GRANTS).exists() and hub.read_grants(state) == []
        assert {d: (_acl(d), d.stat().st_mode) for d in before} == before  # mode 0700, no entry, the old mask
        assert f":{gid}:" not in _acl(base) + _acl(shut)
        assert _as(user, "cat", str(shut / "python")).returncode != 0
        assert hub.close_the_way(state) == []  # nothing recorded: nothing to undo
    finally:
        hub.close_the_way(state) if state.exists() else None
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


def test_a_file_system_without_acls_is_one_line_naming_the_folder(member):
    from labkit.classroom import hub
    from labkit.cli.errors import UsageError

    _, gid = member
    sysfs = Path("/sys/kernel")  # sysfs has no POSIX ACLs
    probe = subprocess.run(["setfacl", "-m", f"g:{gid}:x", str(sysfs)], capture_output=True, text=True)
    if "not supported" not in probe.stderr:
        pytest.skip(f"{sysfs} is not a writable file system without ACLs here: {probe.stderr.strip()}")
    with pytest.raises(UsageError) as err:
        hub.grant_search(sysfs, gid)
    message = str(err.value)
    assert "\n" not in message and str(sysfs) in message and "ACLs" in message and "mount" in message
