"""A weather tool set: the smallest useful example.

Run it offline (the default `fake` model calls every tool once with example arguments):

    agentforge-typed run examples/weather.py:tools "What's the weather in Paris?"

or against a real model:

    OPENAI_API_KEY=... agentforge-typed run examples/weather.py:tools "..." --model openai:gpt-4o-mini

The data is made up, deterministically, so the example needs no network and no API key.
"""

from __future__ import annotations

import zlib
from datetime import date, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from agentforge_typed import tool

Unit = Literal["celsius", "fahrenheit"]


class Weather(BaseModel):
    """Current conditions in a city."""

    city: str
    temperature: float
    unit: Unit
    conditions: str


class DailyForecast(BaseModel):
    """One day of a forecast."""

    day: date
    low: float
    high: float
    conditions: str


_CONDITIONS = ("sunny", "partly cloudy", "overcast", "light rain", "windy")


def _celsius(city: str, day: int) -> float:
    # Made-up but stable: the same city and day always give the same temperature.
    return round(5 + zlib.crc32(f"{city.lower()}/{day}".encode()) % 250 / 10, 1)


def _convert(celsius: float, unit: Unit) -> float:
    return celsius if unit == "celsius" else round(celsius * 9 / 5 + 32, 1)


@tool
def get_weather(city: str, unit: Unit = "celsius") -> Weather:
    """Get the current weather in a city.

    Args:
        city: The city name, e.g. "Paris".
        unit: The temperature unit.
    """
    celsius = _celsius(city, 0)
    conditions = _CONDITIONS[zlib.crc32(city.lower().encode()) % len(_CONDITIONS)]
    return Weather(city=city, temperature=_convert(celsius, unit), unit=unit, conditions=conditions)


@tool
def get_forecast(
    city: str,
    days: Annotated[int, Field(ge=1, le=7)] = 3,
    unit: Unit = "celsius",
) -> list[DailyForecast]:
    """Get the daily forecast for a city, starting tomorrow.

    Args:
        city: The city name, e.g. "Paris".
        days: How many days, 1 to 7.
        unit: The temperature unit.
    """
    start = date(2025, 6, 1)  # fixed, so runs are reproducible
    forecast = []
    for offset in range(1, days + 1):
        low = _celsius(city, offset) - 4
        forecast.append(
            DailyForecast(
                day=start + timedelta(days=offset),
                low=_convert(low, unit),
                high=_convert(low + 8, unit),
                conditions=_CONDITIONS[(zlib.crc32(city.encode()) + offset) % len(_CONDITIONS)],
            )
        )
    return forecast


tools = [get_weather, get_forecast]
"""The TARGET for the CLI: `examples/weather.py:tools`."""
