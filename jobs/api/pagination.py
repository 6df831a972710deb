from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    """?limit= and ?offset=, with a ceiling so one request cannot pull a whole table."""

    default_limit = 50
    max_limit = 500
