from tests.review.browser import browser

__all__ = ["browser"]
