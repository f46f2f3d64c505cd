"""Example Pydantic models: ``Person`` (the CLI's default constraint, one the embedded demo
model reads) and ``Character`` (SGLang's benchmark model, for a real model)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Person(BaseModel):
    """A person: what the README's examples and ``structgen generate`` extract by default."""

    name: str = Field(max_length=40)
    age: int = Field(ge=0, le=120)
    email: str | None = Field(default=None, max_length=40)


class Wand(BaseModel):
    wood: str = Field(max_length=16)
    core: Literal["phoenix feather", "dragon heartstring", "unicorn hair"]
    length: float = Field(ge=7, le=16, multiple_of=0.25)


class Character(BaseModel):
    """A Harry Potter character (after SGLang's ``json_jump_forward`` benchmark)."""

    name: str = Field(max_length=24)
    house: Literal["Gryffindor", "Slytherin", "Ravenclaw", "Hufflepuff"]
    blood_status: Literal["Pure-blood", "Half-blood", "Muggle-born"]
    wand: Wand
    alive: bool
