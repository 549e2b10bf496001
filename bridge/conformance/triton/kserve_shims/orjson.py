"""Shim for orjson (not packaged by Debian): the calls kserve's client makes, over json."""
import json as _json

JSONDecodeError = _json.JSONDecodeError
OPT_SERIALIZE_NUMPY = 1


def _default(o):
    try:
        import numpy as np
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:
        pass
    if isinstance(o, bytes):
        return o.decode()
    raise TypeError(f"not JSON serializable: {type(o)}")


def dumps(obj, default=None, option=None):
    return _json.dumps(obj, default=default or _default, separators=(",", ":")).encode()


def loads(data):
    return _json.loads(data)


class orjson:  # "from orjson import orjson" in inference_client.py
    JSONDecodeError = JSONDecodeError
    OPT_SERIALIZE_NUMPY = OPT_SERIALIZE_NUMPY
    dumps = staticmethod(dumps)
    loads = staticmethod(loads)
