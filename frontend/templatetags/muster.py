"""Small filters that make the pages read like a person wrote them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django import template
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince

from frontend.live import page_query
from jobs import amounts
from jobs.holds import release_hint
from jobs.models import Job, JobHold
from jobs.selectors import job_gpus_held, job_nodes_shown
from jobs.sorting import Sorting
from policy import nodelist
from policy.budget import node_hours_words as _node_hours_words

register = template.Library()


@register.filter
def shell_line(command: Sequence[str]) -> str:
    """A command as one shell line that splits back into the same arguments."""
    return shlex.join(command or [])


@register.filter
def env_lines(env: Mapping[str, str]) -> str:
    return "\n".join(f"{name}={value}" for name, value in sorted((env or {}).items()))


@register.filter
def duration(seconds: float | int | None) -> str:
    """3600 -> '1 h', 5400 -> '1 h 30 min', 90 -> '1 min 30 s' (jobs.amounts.duration, which messages use too)."""
    return amounts.duration(seconds)


# A command in a reason, as the API and the CLI say it: "`muster release 65` lets it start."
_QUOTED_CODE = re.compile(r"`([^`\n]+)`")


@register.filter
def code_quoted(text: object) -> str:
    """A reason as the page shows it: the text escaped, what it quotes in backticks as code (the reason is stored and
    answered by the API with its backticks, which read as noise on a page)."""
    parts = _QUOTED_CODE.split(str(text or ""))
    return format_html_join("", "{}", ((format_html("<code>{}</code>", part) if i % 2 else part,) for i, part in enumerate(parts)))


@register.filter
def reason_on_job_page(job: Job) -> str:
    """A waiting job's reason as its page says it: an owner's hold is ended by the page's Release button, not by the
    command the stored reason gives the API and the CLI (`muster release 8`), which read oddly beside the button."""
    reason = job.pending_reason or ""
    hint = release_hint(job.pk)
    if job.hold == JobHold.USER and reason.endswith(hint):
        return reason[: -len(hint)] + "the Release button lets it start."
    return reason


@register.filter
def ago(moment: datetime | None) -> str:
    """'just now' under a minute, then '5 minutes ago', '2 hours, 3 minutes ago'."""
    if moment is None:
        return ""
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment)} ago"


@register.filter
def waited(moment: datetime | None) -> str:
    """How long since `moment`, to follow 'waiting': 'under a minute', '5 minutes', '2 hours, 3 minutes' (`ago`'s words)."""
    said = ago(moment)
    return "under a minute" if said == "just now" else said.removesuffix(" ago")


@register.filter
def limit(value: float | int | None) -> str:
    """A quota limit: 'unlimited' for None, else the number without trailing zeros."""
    if value is None:
        return "unlimited"
    return f"{value:g}" if isinstance(value, float) else str(value)


@register.filter
def node_hours(value: float | int) -> str:
    """An amount of node-hours an admin typed or added: to three decimals at most, without trailing zeros (2.5, not
    the 2.500 that floatformat:"-3" wrote beside a quota's 1 and a used 0.74)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


@register.filter
def node_hours_words(value: float | int | str) -> str:
    """An amount of node-hours with its unit, 'node-hour' for exactly 1 (policy.budget.node_hours_words): a number as
    `node_hours` writes it (+2.5 node-hours, +1 node-hour), a figure already written as it is ("0.0022 node-hours")."""
    return _node_hours_words(value if isinstance(value, str) else node_hours(value))


@register.filter
def node_hours_unit(value: float | int) -> str:
    """The unit alone, for a figure shown apart from it (in its own element): 'node-hour' beside a 1, else 'node-hours'."""
    return node_hours_words(value).partition(" ")[2]


FACTOR_LABELS = {"fair_share": "Fair share", "age": "Age", "class": "Priority class", "size": "Size", "short": "Short wall time"}


@register.filter
def factor_rows(factors: Mapping[str, tuple[float, float]]) -> list[tuple[str, float, float]]:
    """A priority's factors as (label, factor in [0, 1], weighted contribution), largest contribution first."""
    rows = [(FACTOR_LABELS.get(name, name), value, weighted) for name, (value, weighted) in factors.items()]
    return sorted(rows, key=lambda r: -r[2])


@register.filter
def factor(value: float) -> str:
    """A priority factor to three decimals, or to three figures when smaller: an age of 0.0002 read 0.000 beside the
    0.1 it adds. Never in exponent form: a job queued a second ago has an age of 9.17e-07, which read as jargon in a
    column of decimals; below 0.0001 it is said as such."""
    if 0 < abs(value) < 0.0001:
        return "< 0.0001"
    return f"{value:.3g}" if 0 < abs(value) < 0.001 else f"{value:.3f}"


@register.filter
def priority(value: float | None) -> str:
    """A job's priority as every page shows it, to one decimal (8002.8), as `muster show` does: the job list rounded it
    to 8003 while the job page and the queue said 8002.8, so one job read as two priorities."""
    return "" if value is None else f"{value:.1f}"


@register.filter
def factor_summary(factors: Mapping[str, tuple[float, float]]) -> str:
    """'Fair share 512.3, Age 20.1, ...', each factor kept on one line: a narrow column breaks between them."""
    rows = ((label, f"{weighted:.1f}") for label, _, weighted in factor_rows(factors))
    return format_html_join(", ", '<span class="factor">{} {}</span>', rows)


@register.simple_tag(takes_context=True)
def page_url(context: Mapping[str, Any], param: str, number: int) -> str:
    """`?<param>=<number>` keeping the rest of the current query string (filters, sort), for pagination links."""
    query = page_query(context["request"])
    query[param] = str(number)
    return "?" + query.urlencode()


SORT_ARROWS = {"ascending": "\u25b2", "descending": "\u25bc"}


@register.simple_tag(takes_context=True)
def sort_header(context: Mapping[str, Any], sort: Sorting, key: str, label: str, name: str = "") -> str:
    """A sortable column's header: a link to sort by it (the other way if it is the column sorted by), keeping the
    filters and starting at the first page, with aria-sort and an arrow on the column sorted by. `name` says what
    the column is in the link's title, where the label is too short to ("#")."""
    name = name or label.lower()
    query = page_query(context["request"])
    query.pop("page", None)
    query["sort"] = sort.asks(key)
    direction = sort.aria(key)
    if direction is None:
        return format_html('<th class="sortable"><a href="?{}" title="Sort by {}">{}</a></th>', query.urlencode(), name, label)
    return format_html(
        '<th class="sortable" aria-sort="{}"><a href="?{}" title="Sorted by {}, {}: reverse">{}<span class="sort-arrow" '
        'aria-hidden="true">{}</span></a></th>',
        direction,
        query.urlencode(),
        name,
        direction,
        label,
        SORT_ARROWS[direction],
    )


def _ran_to_its_end(job: Job) -> bool:
    """An ended job that held nodes when it ended (not one cancelled in the queue): its node count is what it held."""
    return job.is_finished and bool(job_nodes_shown(job))


@register.filter
def array_label(job: Job) -> str:
    """An array element as Slurm and `muster` name it, `20_5` (array 20, index 5); "" for a job of no array."""
    return f"{job.array_id}_{job.array_index}" if job.array_id is not None else ""


@register.filter
def job_size_short(job: Job) -> str:
    """What the job asks, for a table cell: nodes x GPUs, an elastic range of nodes x GPUs (with the nodes it holds now
    while it is placed or runs: "3 (2\u20134) nodes", as the CLI's `3(2-4)x8`), or its share of a GPU."""
    if job.shares_gpu:
        asked = f"{job.gpu_fraction:g} GPU" if job.gpu_fraction else "a slice of a GPU"
        held = job_gpus_held(job)
        return f"{held:g} GPU (asked {asked})" if held and job.gpu_fraction != held else asked
    gpus = f"{job.gpus_per_node} GPU{pluralize(job.gpus_per_node)}"
    if job.elastic:
        span = f"{job.min_nodes}\u2013{job.max_nodes}"
        if job.state in ("SCHEDULED", "RUNNING") or _ran_to_its_end(job):
            return f"{job.nodes} ({span}) nodes \u00d7 {gpus}"
        return f"{span} nodes \u00d7 {gpus}"
    return f"{job.nodes} node{pluralize(job.nodes)} \u00d7 {gpus}"


@register.filter
def job_size(job: Job) -> str:
    """What the job holds: "2 nodes x 8 GPUs = 16 GPUs" (with a multiplication sign), or its GPU slice's asks."""
    if job.shares_gpu:
        asks = [f"at least {job.gpu_fraction:g} of a GPU" if job.gpu_fraction else ""]
        asks += [f"{job.gpu_memory_gb:g} GB of GPU memory" if job.gpu_memory_gb else "", "isolated (MIG)" if job.gpu_isolation else ""]
        share = job_gpus_held(job)
        return "A GPU slice: " + ", ".join(a for a in asks if a) + (f"; holds {share:g} of a GPU now" if share else "")
    gpus = f"{job.gpus_per_node} GPU{pluralize(job.gpus_per_node)}"
    # A gang (elastic or not) holds its nodes whole: 2-8 nodes x 4 GPUs on 8-GPU nodes holds, and is charged, 8 a node,
    # as `muster show` says; the page said only its ask.
    whole = job_gpus_held(job)
    holds = f"; holds {whole:g} GPUs, its {job.nodes} nodes whole, as usage counts them" if whole and whole > job.gpus else ""
    if job.elastic:
        held = (
            f", {job.nodes} now" if job.state in ("SCHEDULED", "RUNNING") else f", {job.nodes} at its end" if _ran_to_its_end(job) else ""
        )
        return f"{job.min_nodes} to {job.max_nodes} nodes (elastic{held}) \u00d7 {gpus}{holds}"
    return f"{job_size_short(job)} = {job.gpus} GPU{pluralize(job.gpus)}{holds}"


@register.filter
def hostlist(names: Sequence[str]) -> str:
    """Node names as squeue's NODELIST and `muster queue` write them, `sim-node-[000-007,009-012]`: a 12-node job's list
    ran to twelve lines in the attempts table at 390 px, and was cut after three names in the job list."""
    return nodelist.hostlist(names)
