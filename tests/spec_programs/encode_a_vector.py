import base64
from compression import zstd
import numpy as np
def encode(rows):
    array = np.asarray(rows, dtype=np.float32)
    return {
        "data": base64.b64encode(zstd.compress(array.tobytes())).decode(),
        "dtype": "float32",
        "original_dtype": "torch.float32",
        "shape": list(array.shape),
        "compression": "zstd",
    }
