import os
import requests
from safetensors.torch import load_file

API_BASE = os.environ["ACS_API_BASE"]
HEADERS = {"Authorization": f"Bearer {os.environ['ACS_API_KEY']}"}
JOB_ID = os.environ["JOB_ID"]

answer = requests.get(f"{API_BASE}/harvest/{JOB_ID}", headers=HEADERS, timeout=60)
answer.raise_for_status()
result = answer.json()["result"]

for index, url in enumerate(result["shard_urls"]):
    with requests.get(url, stream=True, timeout=600) as shard:
        shard.raise_for_status()
        with open(f"shard_{index:05d}.safetensors", "wb") as file:
            for chunk in shard.iter_content(chunk_size=1 << 20):
                file.write(chunk)

tensors = load_file("shard_00000.safetensors")
print(tensors["prompt_0"].dtype, tuple(tensors["prompt_0"].shape))
print(tensors["tokens_0"].tolist())
