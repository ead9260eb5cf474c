"""magnet.capture: the kernel side (BPF programs and magnet-read, C, in this
directory) and the Python that builds and drives it.

    from magnet import capture
    with capture.Capture("x.magnet", cgroup=capture.make_cgroup("x")) as cap:
        ...                                  # the cgroup's traffic is recorded
"""
from .session import (CGROUP_PARENT, LOST_ENDED_EARLY, STATUS_DIR, Capture, CaptureError, Settings,
                      build_magnet_read, cgroup2_root, find_magnet_read, join_cgroup, make_cgroup,
                      mark_ended_early, remove_cgroup, running_captures)

__all__ = ["CGROUP_PARENT", "LOST_ENDED_EARLY", "STATUS_DIR", "Capture", "CaptureError", "Settings",
           "build_magnet_read", "cgroup2_root", "find_magnet_read", "join_cgroup", "make_cgroup",
           "mark_ended_early", "remove_cgroup", "running_captures"]
