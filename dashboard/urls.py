"""Routes of the end-user dashboard, mounted at the site root."""
from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(template_name="dashboard/login.html", redirect_authenticated_user=True),
         name="login"),
    path("login/<str:token>/", views.login_link, name="login_link"),
    path("logout/", views.sign_out, name="logout"),
    path("signed-out/", views.signed_out, name="signed_out"),
    path("memories/<uuid:assertion_id>/", views.memory, name="memory"),
    path("memories/<uuid:assertion_id>/correct", views.correct, name="correct"),
    path("memories/<uuid:assertion_id>/retract", views.retract, name="retract"),
    path("memories/<uuid:assertion_id>/erase", views.erase, name="erase"),
    path("questions/<uuid:prompt_id>/answer", views.answer, name="answer"),
    path("time-travel/", views.time_travel, name="time_travel"),
    path("activity/", views.activity, name="activity"),
    path("your-data/", views.your_data, name="data"),
    path("your-data/export.json", views.export, name="export"),
    path("your-data/forget-everything", views.forget_everything, name="forget_everything"),
]
