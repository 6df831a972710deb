"""Per-job GPU and network series, scheduler metrics and their charts.

Not built yet: issue 5 fills this app. It is installed now so its place in the
layout is fixed.
"""
