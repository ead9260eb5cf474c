"""ReplayError: a replay (real TCP, ns-3, `magnet path`) that cannot start or did not
complete, in one line, "WHAT: problem".  The errors of its parts (Ns3Error,
LinkemError, NetnsError, WorkerError, PathError, LinkLogError) are ReplayErrors."""
from magnetlib.errors import MagnetError


class ReplayError(MagnetError):
    """A replay that cannot start or did not complete: one line, "WHAT: problem"."""
