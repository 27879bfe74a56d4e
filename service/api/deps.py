"""Dependencies shared by the routes: the caller and the settings, as ``Annotated`` types
for route signatures."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import Request

from service.config import Settings

from .access import Caller, current_caller


async def app_settings(request: Request) -> Settings:
    """The settings of the app serving the request."""
    return request.app.state.settings


#: The authenticated caller (:func:`.access.current_caller`): its role decides what the
#: reply shows (``Caller.sees_diagnostics``).
CallerDep = Annotated[Caller, Depends(current_caller)]
#: The service's settings: limits, profiles, the noise secret. (The filter route reads
#: them from the app's state instead: on it a dependency costs 1% of the CPU.)
SettingsDep = Annotated[Settings, Depends(app_settings)]
