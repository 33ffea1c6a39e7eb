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
def at_position_2(scale):
    return {"activations": [[vector.tolist()]], "layer_indices": [1], "position_indices": [2], "scale": scale}
client = OpenAI(base_url=os.environ["ACS_API_BASE"], api_key=os.environ["ACS_API_KEY"])
baseline = client.completions.create(
    model="llama-8b",
    prompt="The sky is",
    max_tokens=1,
    temperature=0,
    extra_body={"output_residual_stream": [0, 1], "apply_steering_vectors": [at_position_2(0)]},
)
steered = client.completions.create(
    model="llama-8b",
    prompt="The sky is",
    max_tokens=1,
    temperature=0,
    extra_body={"output_residual_stream": [0, 1], "apply_steering_vectors": [at_position_2(2)]},
)
difference = decode(steered.activations["residual_stream"]) - decode(baseline.activations["residual_stream"])
print(difference[:, :, :4].round(2).tolist())
