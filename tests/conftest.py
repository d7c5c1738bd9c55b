"""Shared test configuration: hypothesis profiles (short in CI, longer locally)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# ---- skips must be on the allow-list (tests/skip_policy.py) ---------------------------------------
_SKIPS: list[tuple[str, str]] = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPS.append((report.nodeid, reason.removeprefix("Skipped: ")))


def pytest_sessionfinish(session, exitstatus):
    from tests.skip_policy import load_patterns, unexpected_skips

    bad = unexpected_skips(_SKIPS, load_patterns())
    if bad:
        session.config._odradek_bad_skips = bad
        if exitstatus == 0:
            session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    bad = getattr(config, "_odradek_bad_skips", None)
    if bad:
        terminalreporter.section("skips not on tests/skip_allowlist.txt (the run fails)", red=True)
        for nodeid, reason in bad:
            terminalreporter.line(f"{nodeid}: {reason}")


def pytest_collection_modifyitems(config, items):
    """Long-profile tests (``@pytest.mark.soak``) are deselected, not skipped, unless ODRADEK_SOAK=1."""
    import os

    if os.environ.get("ODRADEK_SOAK") == "1":
        return
    keep = [item for item in items if item.get_closest_marker("soak") is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep
