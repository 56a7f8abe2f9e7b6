"""A small pytest suite of torch functional API calls: what ``dlcfuzz.migrate.record`` records in
its own tests (it also runs as part of the main suite)."""

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional


def test_avg_pool2d_divisor_override():
    x = torch.arange(16, dtype=torch.float32).reshape(1, 1, 4, 4)
    y = F.avg_pool2d(x, 2, divisor_override=3)
    assert y.shape == (1, 1, 2, 2)
    assert torch.allclose(y, torch.tensor([[[[10.0, 18.0], [42.0, 50.0]]]]) / 3)


def test_conv2d_stride_padding():
    x = torch.ones(1, 2, 5, 5)
    w = torch.ones(3, 2, 3, 3)
    y = F.conv2d(x, w, stride=2, padding=1)
    assert y.shape == (1, 3, 3, 3)
    assert y[0, 0, 1, 1].item() == 18.0  # an interior window: 2 channels x 3 x 3 ones
    assert y[0, 0, 0, 0].item() == 8.0  # a corner: 2 channels x 2 x 2 ones


def test_softmax_last_dim():
    x = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    y = F.softmax(x, dim=-1)
    assert torch.allclose(y.sum(dim=-1), torch.ones(2))
    assert torch.allclose(y[1], torch.full((3,), 1 / 3))


def test_clamp():
    x = torch.tensor([-2.0, -0.5, 0.5, 2.0])
    assert torch.clamp(x, min=-1.0, max=1.0).tolist() == [-1.0, -0.5, 0.5, 1.0]


def test_pad_reflect():
    x = torch.arange(4, dtype=torch.float32).reshape(1, 1, 4)
    y = F.pad(x, (2, 1), mode="reflect")
    assert y.flatten().tolist() == [2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0]


def test_layer_norm():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    y = F.layer_norm(x, (4,))
    assert abs(y.mean().item()) < 1e-6
    assert abs(y.var(unbiased=False).item() - 1.0) < 1e-3
