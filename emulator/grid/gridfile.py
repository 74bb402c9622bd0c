"""Grid files (TOML): the sites, their machines, workloads and policies, and the wide-area
network between them.

::

    [grid]
    jobs_per_site = 10000           # jobs sampled per site from a model, or instead:
    # span_days = 60                # every model site samples the jobs of 60 days of its
    #                               #   arrivals (a busier site type gets more jobs)
    data_mb = [1, 100, 1000]        # triangular: least, mode, most (the paper: 1 MB..1 GB)
    bandwidth_mbps = 40             # between any two sites (the paper: 5 MB/s)
    wan = "constant"                # or "varying": Goteti and Subhlok's stream model on each site's
    wan_floor_mbps = 12             #   wide-area link, between this floor and bandwidth_mbps
    wan_interval_seconds = 600

    [[sites]]
    name = "sdsc1"
    type = "SDSC"                   # the machine type results are also grouped by (optional)
    processors = 128
    workload = "nasa"               # the built-in trace's fitted model, a model JSON from
    load = 0.85                     #   'nodesel workload fit', or an SWF trace
    policy = "easy"

A workload model is sampled afresh in each replication (seeded); an SWF trace is used as it
is. ``load`` (optional) scales the arrival times so the jobs ask for that share of the
site's processors.
"""

import os
from dataclasses import dataclass, field

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from ..errors import InputFileError
from ..files import finite_number, read_input_text
from ..scheduling.scheduler import POLICIES

GRID_KEYS = {"jobs_per_site", "span_days", "data_mb", "bandwidth_mbps", "wan", "wan_floor_mbps",
             "wan_interval_seconds"}
SITE_KEYS = {"name", "type", "processors", "workload", "load", "policy"}


@dataclass
class Site:
    name: str
    processors: int
    workload: str
    load: float = None
    policy: str = "easy"
    type: str = None  # the machine type; the site's name if none


@dataclass
class Grid:
    path: str
    sites: list
    jobs_per_site: int = 10000
    span_days: float = None
    data_mb: tuple = (1.0, 100.0, 1000.0)
    bandwidth_mbps: float = 40.0
    wan: str = "constant"
    wan_floor_mbps: float = 12.0
    wan_interval_seconds: float = 600.0
    base: str = field(default="", repr=False)  # the grid file's folder, for relative paths

    def workload_path(self, site):
        """A site's workload: ``nasa`` or a path relative to the grid file."""
        if site.workload == "nasa" or os.path.isabs(site.workload):
            return site.workload
        return os.path.join(self.base, site.workload)


def _number(path, where, value, *, positive=True, integer=False):
    if not finite_number(value) or (integer and not isinstance(value, int)) or \
            (positive and not value > 0):
        kind = "a positive integer" if integer else "a positive number"
        raise InputFileError(path, where, f"must be {kind}, got {value!r}")
    return value


def grid_from_dict(data, path="<grid>"):
    """A :class:`Grid` from parsed TOML; every error names the field."""
    if not isinstance(data, dict):
        raise InputFileError(path, None, "not a grid file")
    unknown = set(data) - {"grid", "sites"}
    if unknown:
        raise InputFileError(path, sorted(unknown)[0], "unknown table (use [grid] and "
                                                       "[[sites]])")
    top = data.get("grid", {})
    if not isinstance(top, dict):
        raise InputFileError(path, "grid", "must be a table")
    for key in top:
        if key not in GRID_KEYS:
            raise InputFileError(path, f"grid.{key}", "unknown field")
    grid = Grid(path=str(path), sites=[], base=os.path.dirname(os.path.abspath(str(path))))
    if "jobs_per_site" in top:
        grid.jobs_per_site = _number(path, "grid.jobs_per_site", top["jobs_per_site"],
                                     integer=True)
    if "span_days" in top:
        if "jobs_per_site" in top:
            raise InputFileError(path, "grid.span_days", "give jobs_per_site or span_days, "
                                                         "not both")
        grid.span_days = float(_number(path, "grid.span_days", top["span_days"]))
    for key in ("bandwidth_mbps", "wan_floor_mbps", "wan_interval_seconds"):
        if key in top:
            setattr(grid, key, float(_number(path, f"grid.{key}", top[key])))
    if "wan" in top:
        if top["wan"] not in ("constant", "varying"):
            raise InputFileError(path, "grid.wan", f"must be 'constant' or 'varying', got "
                                                   f"{top['wan']!r}")
        grid.wan = top["wan"]
    if grid.wan == "varying" and grid.wan_floor_mbps > grid.bandwidth_mbps:
        raise InputFileError(path, "grid.wan_floor_mbps", "must not exceed bandwidth_mbps")
    if "data_mb" in top:
        d = top["data_mb"]
        if not isinstance(d, list) or len(d) != 3:
            raise InputFileError(path, "grid.data_mb", "must be [least, mode, most] in MB")
        d = [float(_number(path, f"grid.data_mb[{i}]", v)) for i, v in enumerate(d)]
        if not d[0] <= d[1] <= d[2]:
            raise InputFileError(path, "grid.data_mb", "needs least <= mode <= most")
        grid.data_mb = tuple(d)
    sites = data.get("sites")
    if not isinstance(sites, list) or not sites:
        raise InputFileError(path, "sites", "no [[sites]] listed")
    names = set()
    for k, s in enumerate(sites):
        where = f"sites[{k}]"
        if not isinstance(s, dict):
            raise InputFileError(path, where, "must be a table")
        for key in s:
            if key not in SITE_KEYS:
                raise InputFileError(path, f"{where}.{key}", "unknown field")
        name = s.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InputFileError(path, f"{where}.name", "every site needs a name")
        if name in names:
            raise InputFileError(path, f"{where}.name", f"site {name!r} is listed twice")
        names.add(name)
        if "processors" not in s:
            raise InputFileError(path, f"{where}.processors", f"site {name!r} has no "
                                                              "processors")
        procs = _number(path, f"{where}.processors", s["processors"], integer=True)
        workload = s.get("workload", "nasa")
        if not isinstance(workload, str) or not workload:
            raise InputFileError(path, f"{where}.workload", "must be 'nasa' or a file path")
        load = s.get("load")
        if load is not None:
            load = float(_number(path, f"{where}.load", load))
        policy = s.get("policy", "easy")
        if policy not in POLICIES:
            raise InputFileError(path, f"{where}.policy", f"unknown policy {policy!r}; choose "
                                                          f"from {', '.join(POLICIES)}")
        kind = s.get("type", name)
        if not isinstance(kind, str) or not kind.strip():
            raise InputFileError(path, f"{where}.type", "must be a non-empty name")
        grid.sites.append(Site(name, procs, workload, load, policy, kind))
    if len(grid.sites) < 2:
        raise InputFileError(path, "sites", "a grid needs at least two sites")
    return grid


def read_grid(path):
    text = read_input_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputFileError(path, None, f"malformed TOML: {e}") from None
    return grid_from_dict(data, path)
