# Shim: the real kserve/utils/utils.py imports pandas, psutil and cloudevents for the server;
# the inference client needs only these two helpers (copied verbatim).
from typing import Union
from ..constants.constants import PredictorProtocol


def is_v2(protocol: Union[str, PredictorProtocol]) -> bool:
    return protocol == PredictorProtocol.REST_V2 or (
        isinstance(protocol, str)
        and protocol.lower() == PredictorProtocol.REST_V2.value.lower()
    )


def is_v1(protocol: Union[str, PredictorProtocol]) -> bool:
    return protocol == PredictorProtocol.REST_V1 or (
        isinstance(protocol, str)
        and protocol.lower() == PredictorProtocol.REST_V1.value.lower()
    )
