"""Tiny traces for the what-if tests."""

from __future__ import annotations

# Philly format: submit time, run time (s), GPUs, GPU time, tenant (virtual cluster). 2 nodes of 8 GPUs run it all.
TINY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-03 10:00:00,3600,16,57600,vc1
2017-10-03 10:05:00,1800,8,14400,vc2
2017-10-03 10:06:00,600,2,1200,vc2
2017-10-03 10:10:00,1200,1,1200,vc1
2017-10-03 10:20:00,900,4,3600,vc3
2017-10-03 10:30:00,300,8,2400,vc1
"""

# Line 3 (the header is line 1) asks for "two" GPUs.
BAD_LINE_3 = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-03 10:00:00,3600,16,57600,vc1
2017-10-03 10:05:00,1800,two,14400,vc2
2017-10-03 10:06:00,600,2,1200,vc2
"""
