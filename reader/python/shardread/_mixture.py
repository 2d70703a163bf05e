"""A Loader over a mixture of datasets: shardread.Stream, and path= as a list of streams into the
extension's form."""
import numbers as _numbers
import operator as _operator
import os as _os

from ._dataset import _choice_names, _is_url

# a stream's on_error: the options table's names (reader/options.def) by value; None, -1: the
# Loader's
_ON_ERROR_NAMES = _choice_names("on_error")
_ON_ERROR = {None: -1, **{name: v for v, name in enumerate(_ON_ERROR_NAMES) if name}}


class Stream:
    """One dataset of a mixture, for Loader([...]): path (a dataset directory, or whatever a
    Loader's path= takes), and how much of it an epoch holds: weight= (a share of the epoch; all
    streams weighted, or none), or repeat= (each sample about N times an epoch; 1 by default,
    0.5 for half) or choose= (N samples an epoch, drawn anew each epoch). on_error= this
    stream's policy ('fail', 'skip', 'substitute'; default the Loader's)."""

    __slots__ = ("path", "weight", "repeat", "choose", "on_error")

    def __init__(self, path, weight=None, repeat=None, choose=None, on_error=None):
        self.path, self.weight, self.repeat, self.choose = path, weight, repeat, choose
        self.on_error = on_error

    def __repr__(self):
        extra = "".join(f", {k}={getattr(self, k)!r}" for k in self.__slots__[1:]
                        if getattr(self, k) is not None)
        return f"Stream({self.path!r}{extra})"

    def __eq__(self, other):
        return isinstance(other, Stream) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __reduce__(self):
        return (Stream, tuple(getattr(self, k) for k in self.__slots__))


def _streams(path):
    """path= as a list of (path, weight) pairs or Streams: the Streams, else None (one
    dataset)."""
    if isinstance(path, (str, bytes)) or hasattr(path, "__fspath__") or not isinstance(
            path, (list, tuple)):
        return None
    out = []
    for item in path:
        if isinstance(item, Stream):
            out.append(item)
        elif (isinstance(item, (list, tuple)) and len(item) == 2 and
              isinstance(item[1], _numbers.Real) and not isinstance(item[1], bool)):
            out.append(Stream(item[0], weight=item[1]))
        else:
            raise TypeError(f"a mixture is a list of (path, weight) pairs or shardread.Stream, "
                            f"not {item!r}")
    if not out:
        raise ValueError("a mixture needs at least one stream")
    return out


def _mixture_arg(streams, samples_per_epoch, labels, return_streams):
    """The extension's form: (streams, samples_per_epoch, offset_labels, return_streams); a
    stream at a URL is given as its URL (the Loader's cache= and cache_limit= apply)."""
    if labels not in ("keep", "offset"):
        raise ValueError(f"labels must be 'keep' or 'offset', not {labels!r}")
    spe = 0 if samples_per_epoch is None else _operator.index(samples_per_epoch)
    if spe < 0 or (samples_per_epoch is not None and spe == 0):
        raise ValueError(f"samples_per_epoch must be at least 1, not {samples_per_epoch!r}")
    rows = []
    for k, st in enumerate(streams):
        if st.on_error not in _ON_ERROR:
            raise ValueError(f"stream {k}: on_error must be one of "
                             f"{', '.join(n for n in _ON_ERROR_NAMES if n)} (or None: the "
                             f"Loader's), not {st.on_error!r}")
        for name in ("weight", "repeat"):
            v = getattr(st, name)
            if v is not None and (not isinstance(v, _numbers.Real) or isinstance(v, bool) or
                                  not v > 0):
                raise ValueError(f"stream {k} ({st.path!r}): {name} must be a number > 0, "
                                 f"not {v!r}")
        if st.choose is not None and (isinstance(st.choose, bool) or
                                      _operator.index(st.choose) < 1):
            raise ValueError(f"stream {k} ({st.path!r}): choose must be an int >= 1, not "
                             f"{st.choose!r}")
        # a stream at a URL: read as its shards arrive (the library falls back to the whole
        # dataset first where it cannot be)
        rows.append((st.path if _is_url(st.path) else _os.fspath(st.path),
                     float(st.weight or 0), float(st.repeat or 0),
                     int(st.choose or 0), _ON_ERROR[st.on_error]))
    return (tuple(rows), spe, labels == "offset", bool(return_streams))
