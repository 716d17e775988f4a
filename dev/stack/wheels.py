"""Pure-Python wheels made from a few lines of source, as pip installs them: what the stack's
package index serves and what the tests build their own indexes from."""

import base64
import hashlib
import zipfile
from pathlib import Path


def wheel(folder: Path, name: str, version: str, modules: dict[str, str]) -> Path:
    """A ``py3-none-any`` wheel of distribution ``name`` holding ``modules`` (module name to
    source), written into ``folder``."""
    stem = name.replace("-", "_")
    dist_info = f"{stem}-{version}.dist-info"
    files = {f"{module}.py": source for module, source in modules.items()}
    files[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: opensandbox-provider\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n"
    )
    record = []
    for path, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    path = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            # A fixed time, so the same source makes the same bytes.
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
            archive.writestr(info, text)
    return path
