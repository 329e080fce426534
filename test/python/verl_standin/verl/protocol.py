"""TEST STAND-IN for verl.protocol.DataProto (volcengine/verl b178a3cd, verl/protocol.py), written
from its source, not copied. Models where a batch of agent-loop rows can break:

- check_consistency (protocol.py:465-488): every non_tensor_batch column has the batch's length
  ("key {key} length {n} is not equal to batch size {bs}");
- concat (protocol.py:928-972): the tensor batches are torch.cat'ed (a TensorDict cat needs the
  same keys in every part); non_tensor_batch goes through list_of_dict_to_dict_of_list
  (protocol.py:201-210), which takes the FIRST part's keys and asserts every other part's keys are
  among them (`assert key in output`), then concatenates each column; meta_info keys other than
  "metrics" must agree across parts (protocol.py:961-963);
- chunk (protocol.py:875-914): equal parts only (assert at protocol.py:885);
- repeat(interleave=True) (each row n times in a row) and pad_dataproto_to_divisor /
  unpad_dataproto (protocol.py:73-105): a batch whose length is not a multiple of the divisor is
  padded with copies of its FIRST rows (again from the start while more are needed), and the
  copies are dropped from the end after generation;
- union (union_tensor_dict :108-121, union_numpy_dict :187-198): the trainer joins the step's input
  rows with the generated ones; a column both carry must be equal.
Columns are Python lists here (numpy object arrays in verl); tensors are _tensor.Tensor.
"""
from verl._tensor import Tensor, cat


def list_of_dict_to_dict_of_list(list_of_dict):
    if not list_of_dict:
        return {}
    output = {key: [] for key in list_of_dict[0]}
    for data in list_of_dict:
        for key, item in data.items():
            assert key in output, f"{key} not in the first part's keys {sorted(output)}"
            output[key].append(item)
    return output


class DataProto:
    def __init__(self, batch=None, non_tensor_batch=None, meta_info=None):
        self.batch = dict(batch or {})
        self.non_tensor_batch = dict(non_tensor_batch or {})
        self.meta_info = dict(meta_info or {})
        self.check_consistency()

    def __len__(self):
        first = next(iter(self.batch.values()), None)
        return first.rows if first is not None else len(next(iter(self.non_tensor_batch.values()), []))

    def check_consistency(self):
        if not self.batch or not self.non_tensor_batch:
            return
        size = len(self)
        for key, value in self.batch.items():
            assert value.rows == size, f"tensor {key} has {value.rows} rows, batch size {size}"
        for key, value in self.non_tensor_batch.items():
            assert len(value) == size, f"key {key} length {len(value)} is not equal to batch size {size}"

    @staticmethod
    def concat(data):
        keys = [set(d.batch) for d in data]
        if any(k != keys[0] for k in keys):
            raise KeyError(f"TensorDict cat: parts have different keys {[sorted(k) for k in keys]}")
        batch = {key: cat([d.batch[key] for d in data]) for key in data[0].batch}
        non_tensor = {key: [v for part in parts for v in part] for key, parts in list_of_dict_to_dict_of_list([d.non_tensor_batch for d in data]).items()}
        meta, metrics = {}, []
        for d in data:
            for k, v in d.meta_info.items():
                if k == "metrics":
                    metrics.extend(v if isinstance(v, list) else [v])
                elif k in meta:
                    assert meta[k] == v, f"Conflicting values for meta_info key '{k}'"
                else:
                    meta[k] = v
        if metrics:
            meta["metrics"] = metrics
        return DataProto(batch, non_tensor, meta)

    def union(self, other):
        assert len(self) == len(other), "Two tensor dict must have identical batch size"
        for key, value in other.batch.items():
            assert key not in self.batch or self.batch[key].data == value.data, f"{key} differs"
            self.batch[key] = value
        for key, value in other.non_tensor_batch.items():
            assert key not in self.non_tensor_batch or list(self.non_tensor_batch[key]) == list(value), f"`{key}` differs"
            self.non_tensor_batch[key] = value
        for key, value in other.meta_info.items():
            assert key not in self.meta_info or self.meta_info[key] == value, f"meta_info {key} differs"
            self.meta_info[key] = value
        return self

    def select(self, rows):
        """The rows at the given indices (verl's slicing and index selection)."""
        return DataProto({k: Tensor([v.data[i] for i in rows]) for k, v in self.batch.items()}, {k: [v[i] for i in rows] for k, v in self.non_tensor_batch.items()}, self.meta_info)

    def repeat(self, repeat_times, interleave=True):
        assert interleave, "the trainer repeats interleaved"
        return self.select([i for i in range(len(self)) for _ in range(repeat_times)])

    def chunk(self, chunks):
        assert len(self) % chunks == 0, f"only support equal chunk. Got size of DataProto {len(self)} and chunk {chunks}."
        size = len(self) // chunks
        parts = []
        for i in range(chunks):
            rows = slice(i * size, (i + 1) * size)
            parts.append(DataProto({k: Tensor(v.data[rows]) for k, v in self.batch.items()}, {k: v[rows] for k, v in self.non_tensor_batch.items()}, self.meta_info))
        return parts


def pad_dataproto_to_divisor(data, size_divisor):
    if len(data) % size_divisor == 0:
        return data, 0
    pad_size = size_divisor - len(data) % size_divisor
    parts, remaining = [], pad_size
    while remaining > 0:
        take = min(remaining, len(data))
        parts.append(data.select(range(take)))
        remaining -= take
    return DataProto.concat([data] + parts), pad_size


def unpad_dataproto(data, pad_size):
    return data if pad_size == 0 else data.select(range(len(data) - pad_size))
