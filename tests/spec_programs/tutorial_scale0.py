import os
import numpy as np
from openai import OpenAI
vector = np.zeros(4096)
vector[:3] = [1, 2, 3]
client = OpenAI(base_url=os.environ["ACS_API_BASE"], api_key=os.environ["ACS_API_KEY"])
baseline = client.completions.create(
    model="llama-8b",
    prompt="The sky is",
    max_tokens=2,
    temperature=0,
    extra_body={
        "output_residual_stream": [1],
        "apply_steering_vectors": [
            {"activations": [vector.tolist()], "layer_indices": [1], "scale": 0}
        ],
    },
)
print(repr(baseline.choices[0].text))
