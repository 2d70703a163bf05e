"""Loader(transform=): real-world torchvision recipes, compiled into the reader's threads as far
as it runs them exactly and the rest run in Python, equal torchvision applied to the same draws
(the reader's reported ops, the Python ops' per-sample seeds), bit for bit; the plan; the
keywords that take torchvision objects; resume and worker counts never change a batch."""
import numpy as np
import pytest

import shardread
from shardread import _pipeline

torch = pytest.importorskip("torch")
T = pytest.importorskip("torchvision.transforms")
F = pytest.importorskip("torchvision.transforms.functional")
from torchvision.transforms import InterpolationMode  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


class Noise:
    """A custom op the reader does not know: random noise on the tensor (draws from torch's
    global generator, as most custom transforms do)."""

    def __call__(self, t):
        return t + 0.05 * torch.randn_like(t)


class Solarize:
    """A custom op on the PIL image (before ToTensor), drawing from Python's random."""

    def __call__(self, img):
        import random
        return F.solarize(img, random.randint(100, 250))


def reference(stored, ops, python_ops, tensor_ops, seed):
    """torchvision on the PIL image of the stored sample: the reader's reported ops (replayed),
    then tensor_ops (ToTensor and Normalize, as given), the reported erases on the tensor, then
    the Python ops seeded as the Loader seeds them."""
    erases = [kw for name, kw in ops if name == "erase"]
    img = shardread.replay(stored, [(n, kw) for n, kw in ops if n != "erase"])
    x = F.to_pil_image(img if img.shape[2] == 3 else img[:, :, 0])
    for op in tensor_ops:
        x = op(x)
    for e in erases:
        x = F.erase(x, e["i"], e["j"], e["h"], e["w"], torch.tensor(e["v"]).reshape(-1, 1, 1))
    torch.manual_seed(seed)
    import random
    random.seed(seed)
    for op in python_ops:
        x = op(x)
    return x if isinstance(x, torch.Tensor) else np.asarray(x)


def check_recipe(path, transform, tensor_ops, epochs=2, **kw):
    ds = shardread.Dataset(path)
    loader = shardread.Loader(path, batch_size=5, shuffle=True, seed=3, transform=transform,
                              return_params="ops", framework="torch", **kw)
    plan = loader.plan
    python_ops = _pipeline.flatten(transform)[len(plan["c"]):]
    n = 0
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels, indices, ops in loader:
            for k, i in enumerate(indices.tolist()):
                want = reference(ds[i][0], ops[k], python_ops, tensor_ops,
                                 _pipeline.sample_seed(3, epoch, i))
                got = images[k]
                if not isinstance(want, torch.Tensor):
                    want = torch.from_numpy(want.reshape(got.shape))
                assert got.dtype == want.dtype and got.shape == want.shape, (i, ops[k])
                assert torch.equal(got, want), (i, ops[k], (got - want).abs().max())
                n += 1
    assert n == epochs * len(ds)
    return plan


def test_seed_recipe_all_in_c(fx):
    tf = T.Compose([T.RandomResizedCrop((20, 16)), T.RandomHorizontalFlip(),
                    T.ColorJitter(0.2, 0.2, 0.2, 0.1), T.ToTensor(), T.Normalize(MEAN, STD)])
    plan = check_recipe(fx.var, tf, [T.ToTensor(), T.Normalize(MEAN, STD)])
    assert plan["python"] == [] and plan["c_stages"] == ["crop", "flip", "color_jitter",
                                                         "to_tensor", "normalize"]


def test_seed_recipe_with_a_custom_op(fx):
    tf = T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(),
                    T.ColorJitter(0.2, 0.2, 0.2, 0.1), T.ToTensor(), T.Normalize(MEAN, STD),
                    Noise()])
    plan = check_recipe(fx.var, tf, [T.ToTensor(), T.Normalize(MEAN, STD)])
    assert len(plan["c"]) == 5 and plan["python"] == [repr(tf.transforms[-1])]
    assert "Noise is not one of the reader's ops" in plan["python_from"]


def test_timm_like_recipe(fx):
    # a list holding an nn.Sequential (nested pipelines are opened)
    tf = [torch.nn.Sequential(T.RandomResizedCrop(16, interpolation=InterpolationMode.BICUBIC),
                              T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4)),
          T.ToTensor(), T.Normalize(MEAN, STD)]
    assert check_recipe(fx.var, tf, tf[1:])["python"] == []


@pytest.mark.parametrize("policy", ["ta_wide", "randaugment", "autoaugment"])
def test_torchvision_reference_recipe(fx, policy):
    """references/classification/presets.py ClassificationPresetTrain: RRC, flip, the policy,
    PILToTensor, ConvertImageDtype(float), Normalize, RandomErasing."""
    bil = InterpolationMode.BILINEAR
    aa = {"ta_wide": T.TrivialAugmentWide(interpolation=bil),
          "randaugment": T.RandAugment(interpolation=bil),
          "autoaugment": T.AutoAugment(interpolation=bil)}[policy]
    tensor_ops = [T.PILToTensor(), T.ConvertImageDtype(torch.float), T.Normalize(MEAN, STD)]
    tf = T.Compose([T.RandomResizedCrop(16, interpolation=bil), T.RandomHorizontalFlip(0.5),
                    aa, *tensor_ops, T.RandomErasing(p=0.5)])
    plan = check_recipe(fx.var, tf, tensor_ops)
    assert plan["python"] == [] and plan["c_stages"][-1] == "erasing"


def test_an_op_out_of_the_readers_order_runs_in_python(fx):
    # ColorJitter before the flip: the reader flips first, so the prefix ends at the jitter
    tf = [T.RandomResizedCrop(16), T.ColorJitter(0.3, 0.3), T.RandomHorizontalFlip(),
          Solarize(), T.ToTensor()]
    loader = shardread.Loader(fx.var, batch_size=4, transform=tf)
    assert loader.plan["c_stages"] == ["crop", "color_jitter"]
    assert "RandomHorizontalFlip after color_jitter" in loader.plan["python_from"]
    images, labels = next(iter(loader))
    assert images.shape == (4, 3, 16, 16) and images.dtype == np.float32
    # on the PIL image, in Python: flip, Solarize (Python's random), ToTensor
    check_recipe(fx.var, [T.RandomResizedCrop(16), T.RandomVerticalFlip(), Solarize(),
                          T.ToTensor()], [], epochs=1)


def test_workers_threads_processes_and_resume_give_the_same_batches(fx):
    tf = [T.RandomResizedCrop(16), T.ToTensor(), Noise(), T.RandomVerticalFlip()]

    def run(resume=False, **kw):
        loader = shardread.Loader(fx.var, batch_size=4, shuffle=True, seed=9, transform=tf,
                                  return_indices=True, **kw)
        loader.set_epoch(1)
        out = []
        it = iter(loader)
        out.append(next(it))
        if resume:
            state = loader.state_dict()
            loader = shardread.Loader(fx.var, batch_size=4, shuffle=True, seed=9,
                                      transform=tf, return_indices=True, **kw)
            loader.load_state_dict(state)
            it = iter(loader)
        out += list(it)
        return out

    torch.manual_seed(1234)
    want = run(py_workers=1)
    assert torch.initial_seed() == 1234     # the caller's generator is left as it was
    for kw in (dict(py_workers=3), dict(py_workers=2, py_pool="process"), dict(resume=True)):
        got = run(**kw)
        assert len(got) == len(want) == 6
        for a, b in zip(want, got):
            assert len(a) == 3 and np.array_equal(a[2], b[2]) and np.array_equal(a[1], b[1])
            assert np.array_equal(a[0], b[0]), kw


def test_keywords_take_torchvision_objects(fx):
    common = dict(batch_size=6, shuffle=True, seed=5)
    pairs = [(dict(rrc=T.RandomResizedCrop(16, scale=(0.3, 1))),
              dict(size=16, rrc=(0.3, 1))),
             (dict(size=16, flip=T.RandomHorizontalFlip(0.3)), dict(size=16, flip=0.3)),
             (dict(size=16, rotation=T.RandomRotation(15)), dict(size=16, rotation=15)),
             (dict(size=16, affine=T.RandomAffine(10, translate=(0.1, 0.1))),
              dict(size=16, affine=dict(degrees=10, translate=(0.1, 0.1)))),
             (dict(size=16, color_jitter=T.ColorJitter(.4, .4, .4, .1)),
              dict(size=16, color_jitter=(.4, .4, .4, .1))),
             (dict(size=16, grayscale=T.RandomGrayscale(.2)), dict(size=16, grayscale=.2)),
             (dict(size=16, dtype="float32", erasing=T.RandomErasing()),
              dict(size=16, dtype="float32", erasing=0.5))]
    for objs, forms in pairs:
        a = [b[0] for b in shardread.Loader(fx.var, **common, **objs)]
        b = [b[0] for b in shardread.Loader(fx.var, **common, **forms)]
        assert all(np.array_equal(x, y) for x, y in zip(a, b)), objs
        # the same augmentation either way: a state of one loads into the other
        shardread.Loader(fx.var, **common, **forms).load_state_dict(
            shardread.Loader(fx.var, **common, **objs).state_dict())
    with pytest.raises(TypeError, match=r"ambiguous.*\(0.4, 0.4, 0.4\).*dict\(brightness=0.4\)"):
        shardread.Loader(fx.var, size=16, color_jitter=0.4)
    with pytest.raises(TypeError, match="flip takes torchvision's RandomHorizontalFlip"):
        shardread.Loader(fx.var, size=16, flip=T.RandomVerticalFlip())
    with pytest.raises(ValueError, match="expand or center"):
        shardread.Loader(fx.var, size=16, rotation=T.RandomRotation(15, expand=True))
    with pytest.raises(TypeError, match="size=20 was given too"):
        shardread.Loader(fx.var, size=20, rrc=T.RandomResizedCrop(16))
    with pytest.raises(TypeError, match="torchvision's ColorJitter"):
        shardread.Loader(fx.var, size=16, color_jitter="strong")


def test_transform_conflicts_and_scale(fx):
    with pytest.raises(TypeError, match="transform= sets size"):
        shardread.Loader(fx.var, size=16, transform=[T.RandomResizedCrop(16)])
    with pytest.raises(TypeError, match="py_workers"):
        shardread.Loader(fx.fixed, py_workers=2)
    with pytest.raises(TypeError, match="not callable"):
        shardread.Loader(fx.fixed, transform=[3])
    # scale=1: ToTensor's 0..1, mean and std on that scale, bit for bit
    ds = shardread.Dataset(fx.fixed)
    images, _, indices = next(iter(shardread.Loader(
        fx.fixed, batch_size=4, scale=1, mean=MEAN, std=STD, layout="NCHW",
        return_indices=True)))
    for k, i in enumerate(indices):
        want = T.Normalize(MEAN, STD)(F.to_tensor(ds[int(i)][0])).numpy()
        assert np.array_equal(images[k], want)
    with pytest.raises(ValueError, match="scale must be 1"):
        shardread.Loader(fx.fixed, scale=2)
    with pytest.raises(ValueError, match="scale=1"):
        shardread.Loader(fx.fixed, mean=MEAN, std=STD)


def test_state_with_other_augmentation_is_refused(fx):
    a = shardread.Loader(fx.var, batch_size=4, size=16, flip=True)
    b = shardread.Loader(fx.var, batch_size=4, size=16, flip=0.3)
    with pytest.raises(ValueError, match="other augmentation options"):
        b.load_state_dict(a.state_dict())
    b.load_state_dict(a.state_dict(), strict=False)
    shardread.Loader(fx.var, batch_size=4, size=16, flip=True, threads=1).load_state_dict(
        a.state_dict())


def test_a_mistyped_keyword_gets_did_you_mean(fx):
    with pytest.raises(TypeError, match="'colour_jitter': did you mean 'color_jitter'"):
        shardread.Loader(fx.fixed, colour_jitter=(0.4, 0.4, 0.4))
    with pytest.raises(TypeError, match="'transforms': did you mean 'transform'"):
        shardread.Loader(fx.fixed, transforms=[])


def test_stub_defaults_equal_the_runtime():
    import ast
    import inspect
    import os
    stub = os.path.join(os.path.dirname(shardread.__file__), "__init__.pyi")
    tree = ast.parse(open(stub).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Loader")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    args = init.args.args[1:]
    defaults = dict(zip([a.arg for a in args][-len(init.args.defaults):],
                        [ast.literal_eval(d) for d in init.args.defaults]))
    runtime = inspect.signature(shardread.Loader).parameters
    assert set(defaults) == {k for k, p in runtime.items() if p.default is not p.empty}
    for k, v in defaults.items():
        assert runtime[k].default == v, k


def test_peeking_then_the_loop_follows_the_documented_rule(fx):
    """docs/PYTHON.md, Peeking: a peek takes the first batch of epoch 0, and the loop's iter()
    continues epoch 0 after it (where state_dict says the Loader stands), then epoch 1 follows;
    set_epoch(0) before the loop reads epoch 0 whole. With transform= (a Python op) the same."""
    def idx(loader):
        return [b[2].tolist() for b in loader]
    ref = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=2, return_indices=True)
    epoch0 = idx(ref)
    epoch1 = idx(ref)
    loader = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=2, return_indices=True)
    assert next(iter(loader))[2].tolist() == epoch0[0]
    assert (loader.state_dict()["epoch"], loader.state_dict()["cursor"]) == (0, 1)
    it = iter(loader)
    assert len(loader) == len(epoch0) - 1        # what the continuing iteration yields
    assert [b[2].tolist() for b in it] == epoch0[1:]
    assert idx(loader) == epoch1
    loader = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=2, return_indices=True)
    next(iter(loader))
    loader.set_epoch(0)
    assert idx(loader) == epoch0
    loader = shardread.Loader(fx.fixed, batch_size=4, shuffle=True, seed=2, return_indices=True,
                              transform=[lambda im: im], framework="torch")
    assert next(iter(loader))[2].tolist() == epoch0[0]
    assert idx(loader) == epoch0[1:]


@pytest.mark.parametrize("recipe", ["eval", "bicubic_pad", "max_size", "gray"])
def test_resize_then_center_crop_in_c_equals_torchvision(fx, recipe):
    """An evaluation recipe Resize(S) + CenterCrop + ToTensor + Normalize runs in the reader's
    threads (resize=, the build's --short-side/--crop geometry) and equals torchvision applied
    to the PIL image of the stored sample, pixel for pixel: enlarging and reducing, a crop
    larger than the resize on one axis (CenterCrop pads), max_size, bicubic, gray."""
    bic = InterpolationMode.BICUBIC
    path = fx.var_gray if recipe == "gray" else fx.var
    head = {"eval": [T.Resize(20), T.CenterCrop(16)],
            "bicubic_pad": [T.Resize(12, interpolation=bic), T.CenterCrop((18, 14))],
            "max_size": [T.Resize([30], max_size=34), T.CenterCrop((28, 20))],
            "gray": [T.Resize(14), T.CenterCrop(12)]}[recipe]
    norm = T.Normalize(MEAN[:1], STD[:1]) if recipe == "gray" else T.Normalize(MEAN, STD)
    tf = T.Compose(head + [T.ToTensor(), norm])
    ds = shardread.Dataset(path)
    loader = shardread.Loader(path, batch_size=5, transform=tf, return_indices=True,
                              framework="torch", threads=2)
    assert loader.plan["python"] == [] and loader.plan["c_stages"][:2] == ["crop", "crop"]
    n, sizes = 0, set()
    for images, _, indices in loader:
        for k, i in enumerate(indices.tolist()):
            img = ds[i][0]
            sizes.add(img.shape[:2])
            want = tf(F.to_pil_image(img if img.shape[2] == 3 else img[:, :, 0]))
            assert torch.equal(images[k], want), (i, img.shape, (images[k] - want).abs().max())
            n += 1
    assert n == len(ds) and len(sizes) > 3
    # the keyword form: resize= with size=, the same batches
    kw = dict(size=tuple(head[1].size), resize=head[0].size if recipe != "max_size" else
              (30, 34), interpolation=_pipeline._interp(head[0].interpolation))
    a = next(iter(shardread.Loader(path, batch_size=5, **kw)))[0]
    b = next(iter(shardread.Loader(path, batch_size=5, transform=head)))[0]
    assert np.array_equal(a, b)


def test_resize_alone_or_with_other_crops_stays_in_python(fx):
    """A Resize not followed by CenterCrop gives every image its own size: it ends the prefix;
    resize= refuses what it cannot mean."""
    for tf in ([T.Resize(16), T.RandomCrop(12), T.ToTensor()],
               [T.Resize((16, 12)), T.CenterCrop(12), T.ToTensor()],
               [T.RandomHorizontalFlip(), T.Resize(16), T.CenterCrop(12)]):
        plan = _pipeline.compile_pipeline(tf, 3)
        assert type(plan.python_ops[0]).__name__ == "Resize", plan
    with pytest.raises(ValueError, match=r"resize= needs size="):
        shardread.Loader(fx.var, resize=16)
    with pytest.raises(ValueError, match=r"resize= and rrc= exclude"):
        shardread.Loader(fx.var, resize=16, size=12, rrc=(0.5, 1))
    with pytest.raises(ValueError, match=r"max_size must be above the size 16"):
        shardread.Loader(fx.var, resize=(16, 16), size=12)
    with pytest.raises(TypeError, match=r"transform= sets resize, size"):
        shardread.Loader(fx.var, resize=16, size=12, transform=[T.Resize(16), T.CenterCrop(12)])


def test_fields_with_python_ops_add_no_indices(tmp_path):
    """fields= with a transform= that runs ops in Python: the batches are (images, labels,
    fields), the indices after them only when asked for (the Python stage reads them itself)."""
    items = [(np.full((6, 5, 3), i, np.uint8), i % 2, {"n": -i}) for i in range(7)]
    out = str(tmp_path / "f")
    shardread.build(items, out, format="raw", threads=1, shard_samples=3)
    tf = [lambda im: im]
    b = next(iter(shardread.Loader(out, batch_size=4, fields=True, transform=tf)))
    assert len(b) == 3 and b[1].tolist() == [0, 1, 0, 1]
    assert b[2]["n"].tolist() == [0, -1, -2, -3] and b[0][:, 0, 0, 0].tolist() == [0, 1, 2, 3]
    b = next(iter(shardread.Loader(out, batch_size=4, fields=True, transform=tf,
                                   return_indices=True)))
    assert len(b) == 4 and b[3].tolist() == [0, 1, 2, 3] and b[2]["n"].tolist()[1] == -1
