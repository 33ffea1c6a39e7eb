import base64
import os
from compression import zstd
import numpy as np
from openai import OpenAI
def decode(tensor):
    raw = zstd.decompress(base64.b64decode(tensor["data"]))
    array = np.frombuffer(raw, dtype=tensor["dtype"]).reshape(tensor["shape"])
    if tensor["original_dtype"] == "torch.bfloat16":
        array = (array.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return array
vector = np.zeros(4096)
vector[:3] = [1, 2, 3]
client = OpenAI(base_url=os.environ["ACS_API_BASE"], api_key=os.environ["ACS_API_KEY"])
completion = client.completions.create(
    model="llama-8b",
    prompt="The sky is",
    max_tokens=2,
    extra_body={
        "output_residual_stream": [1],
        "apply_steering_vectors": [{"activations": [vector.tolist()], "layer_indices": [1], "scale": 2}],
    },
)
residual_stream = decode(completion.activations["residual_stream"])
print(residual_stream.shape)
print(residual_stream[0, :, :4].tolist())
