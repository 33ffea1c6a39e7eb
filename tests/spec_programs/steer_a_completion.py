import os
import numpy as np
from openai import OpenAI
vector = np.zeros(4096)
vector[0] = 0.5
client = OpenAI(base_url=os.environ["ACS_API_BASE"], api_key=os.environ["ACS_API_KEY"])
completion = client.completions.create(
    model="llama-8b",
    prompt="The sky is",
    max_tokens=2,
    extra_body={"apply_steering_vectors": [{"activations": [vector.tolist()], "layer_indices": [1], "scale": 2.0}]},
)
print(repr(completion.choices[0].text))
