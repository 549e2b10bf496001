# Shim __init__: the real one imports the model server (fastapi, uvicorn, kubernetes, ...).
from .inference_client import InferenceGRPCClient, InferenceRESTClient, RESTConfig
from .protocol.infer_type import InferRequest, InferInput, InferResponse, InferOutput
