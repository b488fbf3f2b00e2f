"""The pinned data release of each built-in benchmark: where its files come from and the digest each must
have (each benchmark object hands its own out as `release`; a plugin pins its own).

This module is the one place in the code that names the built-in benchmarks' hosts; docs/data.md
explains each pin. A mirror replaces only the base URL (runner.engine.datasets), never the digests, so a
mirrored file is still checked against what the benchmark's authors published at the pinned revision.
"""

from __future__ import annotations

from ifsweep.benchmarks.base import DataFile, Release

__all__ = ["CFBENCH", "EIFBENCH", "FOLLOWBENCH", "INFOBENCH"]

_FOLLOWBENCH_REV = "6278f4c1377b4eafab737267b8b21acd52ea0e52"
_CFBENCH_REV = "0bcbf9b0bcf21113a9813f86ed51a2135b328e41"
_EIFBENCH_REV = "90a710154873863efafb64a8552749c4639bd04c"
_INFOBENCH_REV = "cef03a2830944bfb0d201107895ddd0e0e90bf0e"

_FOLLOWBENCH_SHA256 = {
    "data/content_constraints.json": "dedf04579bf205c1422e18ee1033d0372b02196ca4b5e921a3a65dca714e226b",
    "data/example_constraints.json": "205d10ecde31b974f0c1537be4952b5e075ae5ca58008dc08aef1c442c32bada",
    "data/format_constraints.json": "3b93ee931186edcb4e0a5f260de18cd550586c985192da39262fd023e90d8a76",
    "data/mixed_constraints.json": "eae529546e0ef6a4a4936b6221cd25da9debaf261272409ed1fd57e8260bf820",
    "data/situation_constraints.json": "cab0e31e3f8dd69ba71018dde3eb63f3336b8aea6df82c7997da6abcbc159fb4",
    "data/style_constraints.json": "5a9a049a24a9a53e67b4ad97f1fb7633b4629f6ce461662888804313cc90c27a",
    "data_zh/content_constraints.json": "f0baaee245a24fe3f38e4e7bd18c44700f67557397989c46c58ab4482d46f28f",
    "data_zh/example_constraints.json": "33a0f6f2b72b530de42907fbdde6947b70c7676ee6e78a9078ecd63bca97c437",
    "data_zh/format_constraints.json": "65400edb71326ad8e69474701ab14252c4d3d2e9b8b49643716d897967d6636e",
    "data_zh/mixed_constraints.json": "5495223e7f93d0fccc2b63ffd951b07825b1b7c82b4a009d99efae56b312dd53",
    "data_zh/situation_constraints.json": "2bb26ae2df58d63ccfd2b512adb0c66c33f1fe5c8a1368c3c0bc9aff5d87689c",
    "data_zh/style_constraints.json": "7e9ee17fa2520c8187438fc0a66e63bc6831bf4e51c2ee6429b46b0bfdec6a27",
}

FOLLOWBENCH = Release(
    base_url=f"https://raw.githubusercontent.com/YJiangcm/FollowBench/{_FOLLOWBENCH_REV}",
    revision=_FOLLOWBENCH_REV,
    files=tuple(DataFile(relpath, sha256=digest) for relpath, digest in _FOLLOWBENCH_SHA256.items()),
)

# The Hugging Face copy is the only published one; its digest comes from public code, not checked here.
INFOBENCH = Release(
    base_url=f"https://huggingface.co/datasets/kqsong/InFoBench/resolve/{_INFOBENCH_REV}",
    revision=_INFOBENCH_REV,
    files=(
        DataFile(
            "InfoBench.json",
            sha256="66a2ee8d70208a7a879a17f471ba0ffd097b698265ea4796be99a273fdcc6559",
        ),
    ),
)

CFBENCH = Release(
    base_url=f"https://raw.githubusercontent.com/PKU-Baichuan-MLSystemLab/CFBench/{_CFBENCH_REV}",
    revision=_CFBENCH_REV,
    files=(
        DataFile(
            "data/cfbench_data.json",
            sha256="f28bfe94420ff61063183712179988718c6caedcdd3d0635cc6d0383289796fc",
        ),
    ),
)

# Two EIFBench files were never copied beside the project, so only their git blob ids (from the
# repository tree at the pinned commit) are known; the blob id pins the content just as well.
EIFBENCH = Release(
    base_url=f"https://raw.githubusercontent.com/Hope-Rita/EIFBench/{_EIFBENCH_REV}",
    revision=_EIFBENCH_REV,
    files=(
        DataFile(
            "data/sorted_party100.json",
            sha256="6113c65701b8a8fd5c5a03e0abb00728a2f865121c919c929d05c9871c5e53f0",
        ),
        DataFile("data/sorted_single450.json", git_blob="1856fe41885b8bc9e39c6a69dcf969e542b6e62f"),
        DataFile("data/sorted_dialogue450.json", git_blob="800eff293ba303b477f060ab7521cf737d0fe126"),
    ),
)
