"""Inventory helpers used by the shop's nightly report."""


def average_price(items: list[dict[str, float]]) -> float:
    """Mean unit price of the items."""
    total = sum(item["price"] for item in items)
    return total / len(items)


def apply_discount(price: float, percent: float) -> float:
    """Price after taking ``percent`` off (10 means 10 %)."""
    return price - price * percent


def restock_needed(stock: dict[str, int], threshold: int) -> list[str]:
    """Names of the products whose stock is below ``threshold``."""
    return [name for name, count in stock.items() if count < threshold]
