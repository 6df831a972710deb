from django.apps import AppConfig


class WhatifConfig(AppConfig):
    name = "whatif"
    verbose_name = "What-if replay"
    default_auto_field = "django.db.models.BigAutoField"
