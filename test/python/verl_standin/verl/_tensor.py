"""TEST DOUBLE: the few torch tensor operations the verl stand-in and termgrade's estimator use,
over nested Python lists (rows of a batch). Not torch; nothing here ships with termgrade."""


class Tensor:
    def __init__(self, data):
        self.data = [list(r) if isinstance(r, (list, tuple)) else r for r in data]

    @property
    def rows(self):
        return len(self.data)

    def size(self, dim):
        return self.rows if dim == 0 else len(self.data[0])

    def tolist(self):
        return [list(r) if isinstance(r, list) else r for r in self.data]

    def sum(self, dim=-1):
        return Tensor([sum(r) for r in self.data])

    def __gt__(self, other):
        return Tensor([v > other for v in self.data])

    def new_tensor(self, values):
        return Tensor(values)

    def unsqueeze(self, dim):
        assert dim == -1
        return Tensor([[v] for v in self.data])

    def __mul__(self, other):
        # a column (n, 1) times a matrix (n, L): broadcast along the row, as torch does
        a, b = self.data, other.data
        if isinstance(a[0], list) and len(a[0]) == 1:
            return Tensor([[x[0] * y for y in row] for x, row in zip(a, b, strict=True)])
        return Tensor([[x * y for x, y in zip(r, s, strict=True)] for r, s in zip(a, b, strict=True)])


def cat(tensors):
    """torch.cat along dim 0; rows of different widths cannot be stacked."""
    rows = [r for t in tensors for r in t.data]
    widths = {len(r) for r in rows if isinstance(r, list)}
    if len(widths) > 1:
        raise RuntimeError(f"Sizes of tensors must match except in dimension 0: {sorted(widths)}")
    return Tensor(rows)
