"""The memory a fit may still allocate, read as Linux and container runtimes publish it."""

from calbench.calibrators.solvers import memory


def test_meminfo_gives_the_kernels_available_memory_in_bytes(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   17000000 kB\n")
    assert memory._meminfo_available(meminfo) == 17_000_000 * 1024
    assert memory._meminfo_available(tmp_path / "absent") is None


def test_a_containers_headroom_is_its_limit_less_its_use(tmp_path):
    (tmp_path / "memory.max").write_text("8000000000\n")
    (tmp_path / "memory.current").write_text("3000000000\n")
    assert memory._cgroup_headroom(tmp_path) == 5_000_000_000
    (tmp_path / "memory.max").write_text("max\n")  # cgroup v2 without a limit
    assert memory._cgroup_headroom(tmp_path) is None
    v1 = tmp_path / "memory"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1 without one
    (v1 / "memory.usage_in_bytes").write_text("10634502144\n")
    assert memory._cgroup_headroom(tmp_path) is None
    (v1 / "memory.limit_in_bytes").write_text("12000000000\n")
    assert memory._cgroup_headroom(tmp_path) == 12_000_000_000 - 10_634_502_144


def test_the_smaller_of_the_kernels_and_the_containers_figure_is_taken(monkeypatch):
    monkeypatch.setattr(memory, "_meminfo_available", lambda: 17 * 2**30)
    monkeypatch.setattr(memory, "_cgroup_headroom", lambda: 4 * 2**30)
    assert memory.available_memory() == 4 * 2**30
    monkeypatch.setattr(memory, "_cgroup_headroom", lambda: None)
    assert memory.available_memory() == 17 * 2**30
