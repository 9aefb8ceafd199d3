from django.http import HttpResponse
from django.urls import path


def ok(request):
    return HttpResponse("fine")


def broken(request):
    raise ValueError("the view is broken")


urlpatterns = [path("ok/", ok), path("broken/", broken)]
