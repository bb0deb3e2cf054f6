"""mkdocs hook: README.md is the site's front page (index.md), so the two never drift apart.

README links to pages as docs/PAGE.md: on the site they are PAGE.md. A link to another file
of the repository (outside docs/) has no page on the site: its text stays, as code.
"""

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]


def readme_as_index(text: str) -> str:
    """README.md's markdown with its links made relative to docs/."""
    text = re.sub(r"\]\(docs/", "](", text)

    def outside(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        if re.match(r"^(#|[a-z]+:)", target) or not (ROOT / target.split("#")[0]).exists():
            return match.group(0)  # an anchor, a URL, or a broken link that --strict reports
        if target.endswith(".md") and (ROOT / "docs" / target).exists():
            return match.group(0)
        return label if label.startswith("`") else f"`{label}`"

    return re.sub(r"\[([^\]]+)\]\(([^)]+)\)", outside, text)


def on_files(files: Files, config) -> Files:
    files.append(
        File.generated(config, "index.md", content=readme_as_index((ROOT / "README.md").read_text()))
    )
    return files
