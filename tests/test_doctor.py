import pytest

from labkit.doctor import env as doctor


@pytest.mark.slow  # starts a real 2-process torchrun
def test_checks_pass_on_this_machine_and_torchrun_probe_really_runs_two_ranks():
    checks = {c.name: c for c in doctor.run_checks(torchrun=True)}
    assert checks["python"].status == "OK"
    assert checks["torchrun x2"].status == "OK", checks["torchrun x2"].detail
    assert not [c for c in checks.values() if c.status == "FAIL"]


def test_cuda_build_without_gpu_fails_with_a_fix(monkeypatch):
    import torch

    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(doctor, "nvidia_present", lambda: False)
    c = doctor.check_torch_build()[0]
    assert c.status == "FAIL" and "CPU" in c.fix


def test_missing_required_package_fails_with_setup_fix(monkeypatch):
    monkeypatch.setitem(doctor.PACKAGES, "no-such-pkg-xyz", ("no_such_pkg_xyz", True))
    c = next(c for c in doctor.check_packages() if c.name == "no-such-pkg-xyz")
    assert c.status == "FAIL" and "make setup" in c.fix


def test_cli_exit_code_reflects_failures(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "run_checks", lambda torchrun: [doctor.Check("x", "FAIL", "broken", "do y")])
    assert doctor._cmd_env(type("A", (), {"no_torchrun": True})()) == 1
    assert "fix: do y" in capsys.readouterr().out


def test_pytriton_missing_where_it_has_no_wheel_is_not_a_warning(monkeypatch):
    monkeypatch.setitem(doctor.PACKAGES, "nvidia-pytriton", ("no_such_pytriton_xyz", False))
    monkeypatch.setattr(
        doctor.metadata, "version", lambda d: (_ for _ in ()).throw(doctor.metadata.PackageNotFoundError(d))
    )
    monkeypatch.setattr(doctor, "pytriton_wheel_exists", lambda: False)
    c = next(c for c in doctor.check_packages() if c.name == "nvidia-pytriton")
    assert c.status == "OK" and "ONNX Runtime" in c.detail
    monkeypatch.setattr(doctor, "pytriton_wheel_exists", lambda: True)
    c = next(c for c in doctor.check_packages() if c.name == "nvidia-pytriton")
    assert c.status == "WARN" and "triton" in c.fix
