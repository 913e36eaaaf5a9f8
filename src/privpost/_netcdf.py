"""Write a posterior's ArviZ layout (:meth:`privpost.posterior.Posterior.groups`) to netCDF4.

``Posterior.to_netcdf`` writes the file that ``xarray.DataTree.to_netcdf(path,
engine="h5netcdf")`` would write for :meth:`~privpost.posterior.Posterior.to_datatree` -- one
HDF5 group per ArviZ group, each dimension a netCDF dimension with its coordinate variable, the
group attributes as netCDF attributes -- through the same library xarray calls (h5netcdf),
but without importing xarray (and with it pandas): ~0.45 s of CPU that a second ``privpost infer
... -o p.nc`` would otherwise spend on a 0.9 s run (benchmarks/README.md, "infer -o p.nc").
``xarray.open_datatree`` / ``arviz.from_netcdf`` read the file back identical to
``to_datatree()`` (tests/test_posterior_io.py checks every group, variable, coordinate, dtype
and attribute).

Encodings are xarray's for these dtypes: floating and integer arrays as they are; booleans as
``int8`` with the attribute ``dtype = "bool"`` (xarray decodes them back to ``bool``); text as
variable-length UTF-8 strings. Any other dtype is refused with a
:class:`~privpost.errors.PrivpostError` naming the variable.
"""

from __future__ import annotations

import numpy as np

from privpost.errors import PrivpostError

__all__ = ["write_groups"]


def _encode(group: str, name: str, arr: np.ndarray) -> tuple[np.ndarray, object, dict]:
    """``(data, h5 dtype, extra attributes)`` of one variable, as xarray encodes it."""
    arr = np.asarray(arr)
    kind = arr.dtype.kind
    if kind in "fiu":
        return np.ascontiguousarray(arr), arr.dtype, {}
    if kind == "b":
        return arr.astype(np.int8), np.dtype(np.int8), {"dtype": "bool"}
    if kind in "US":
        import h5py

        text = arr.astype(str).astype(object)
        return text, h5py.string_dtype("utf-8"), {}
    raise PrivpostError(f"{group}/{name}: arrays of dtype {arr.dtype} cannot be written to "
                        "netCDF (numbers, booleans and text only)")


def write_groups(groups: dict[str, dict], path: str) -> None:
    """Write ``groups`` (the layout of ``Posterior.groups``) to a new netCDF4 file at ``path``.

    ``groups``: ``{group: {"vars": {name: (dims, array)}, "coords": {dim: array (size,)},
    "attrs": {str: str | int}}}``; every dimension used by a variable has a coordinate of its
    size. The file is complete and closed when this returns (an existing file is replaced); a
    path that cannot be created is refused with a :class:`~privpost.errors.PrivpostError`.
    """
    import h5netcdf

    for gname, g in groups.items():            # check everything before creating the file
        for name, (dims, arr) in g["vars"].items():
            for d, size in zip(dims, np.shape(arr)):
                if d not in g["coords"] or len(g["coords"][d]) != size:
                    raise PrivpostError(f"{gname}/{name}: dimension {d!r} of size {size} has "
                                        "no coordinate of that size")
            _encode(gname, name, arr)
    try:
        f = h5netcdf.File(path, "w")
    except OSError as exc:                     # no such folder, a folder, no permission, ...
        raise PrivpostError(f"output {path}: cannot create the netCDF file ({exc})") from None
    with f:
        for gname, g in groups.items():
            grp = f.create_group(gname)
            grp.dimensions = {d: len(c) for d, c in g["coords"].items()}
            for d, c in g["coords"].items():
                data, dtype, extra = _encode(gname, d, np.asarray(c))
                var = grp.create_variable(d, (d,), dtype=dtype, data=data)
                var.attrs.update(extra)
            for name, (dims, arr) in g["vars"].items():
                data, dtype, extra = _encode(gname, name, arr)
                var = grp.create_variable(name, tuple(dims), dtype=dtype, data=data)
                var.attrs.update(extra)
            for key, value in g["attrs"].items():
                grp.attrs[key] = value
        f.flush()
