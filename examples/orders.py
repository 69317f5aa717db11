"""Order management: nested DTOs and a side-effecting tool that must not run concurrently.

The tools are methods of an `OrderDesk` that owns an in-memory catalogue and order book; the
CLI target is the instance:

    agentforge-typed run examples/orders.py:desk "Order two keyboards to 1 Main St, Springfield"

`place_order` changes state (stock, the order book), so it is `sequential=True`: under
`ToolService.achat` it never runs at the same time as another call of its round, and the
calls before it in the round finish first.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, Field

from agentforge_typed import ModelRetry, tool


class Sku(str, enum.Enum):
    """A product in the catalogue."""

    KEYBOARD = "KB-101"
    MOUSE = "MS-202"
    MONITOR = "MN-303"


class Address(BaseModel):
    """Where an order is shipped."""

    street: str
    city: str
    postal_code: Annotated[str, Field(min_length=3, max_length=10)]
    country: Annotated[str, Field(description="ISO 3166-1 alpha-2 code", pattern=r"^[A-Z]{2}$")]


class OrderLine(BaseModel):
    """One product and how many of it."""

    sku: Sku
    quantity: Annotated[int, Field(ge=1, le=100)]


class OrderRequest(BaseModel):
    """What the customer wants and where it goes."""

    lines: Annotated[list[OrderLine], Field(min_length=1)]
    shipping: Address
    note: str | None = None


class Quote(BaseModel):
    """The price of an order, before it is placed."""

    subtotal: Decimal
    shipping: Decimal
    total: Decimal


class Confirmation(BaseModel):
    """A placed order."""

    order_id: str
    total: Decimal
    ship_to: Address


_PRICES = {
    Sku.KEYBOARD: Decimal("49.90"),
    Sku.MOUSE: Decimal("19.90"),
    Sku.MONITOR: Decimal("189.00"),
}


@dataclass
class OrderDesk:
    """The tools of an order desk, with the state they share."""

    stock: dict[Sku, int] = field(
        default_factory=lambda: {Sku.KEYBOARD: 10, Sku.MOUSE: 25, Sku.MONITOR: 3}
    )
    orders: dict[str, OrderRequest] = field(default_factory=dict)

    @tool
    def list_products(self) -> dict[str, dict[str, object]]:
        """List the catalogue: each SKU with its price and the units in stock."""
        return {
            sku.value: {"name": sku.name.lower(), "price": str(_PRICES[sku]), "in_stock": units}
            for sku, units in self.stock.items()
        }

    @tool
    def quote_order(self, order: OrderRequest) -> Quote:
        """Price an order without placing it.

        Args:
            order: The order lines and the shipping address.
        """
        subtotal = sum((_PRICES[line.sku] * line.quantity for line in order.lines), Decimal(0))
        shipping = Decimal("0.00") if subtotal >= 100 else Decimal("7.50")
        return Quote(subtotal=subtotal, shipping=shipping, total=subtotal + shipping)

    @tool(sequential=True)
    def place_order(self, order: OrderRequest) -> Confirmation:
        """Place an order: reserves the stock and records the order. Quote it first.

        Args:
            order: The order lines and the shipping address.
        """
        for line in order.lines:
            if self.stock[line.sku] < line.quantity:
                # Tell the model what is wrong so it can adjust the order.
                raise ModelRetry(
                    f"only {self.stock[line.sku]} of {line.sku.value} in stock, "
                    f"{line.quantity} requested"
                )
        for line in order.lines:
            self.stock[line.sku] -= line.quantity
        order_id = f"ORD-{len(self.orders) + 1:04d}"
        self.orders[order_id] = order
        total = self.quote_order(order).total
        return Confirmation(order_id=order_id, total=total, ship_to=order.shipping)


desk = OrderDesk()
"""The TARGET for the CLI: `examples/orders.py:desk`."""
