import json
import os
from openai import BadRequestError, OpenAI
vector = [0.0] * 4096
client = OpenAI(base_url=os.environ["ACS_API_BASE"], api_key=os.environ["ACS_API_KEY"])
try:
    client.completions.create(
        model="llama-8b",
        prompt=[128000, 791, 13180, 374],
        max_tokens=2,
        extra_body={"apply_steering_vectors": [{"activations": [[vector]], "layer_indices": [1], "position_indices": [5]}]},
    )
except BadRequestError as error:
    print(json.dumps(error.response.json(), indent=2))
