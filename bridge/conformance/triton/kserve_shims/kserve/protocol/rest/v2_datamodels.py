# Shim: the real module is pydantic-2 models for the server's REST handlers (Debian has pydantic 1);
# infer_type only uses InferenceRequest as a type and in InferRequest.from_inference_request.
class InferenceRequest:  # noqa: D101
    pass
