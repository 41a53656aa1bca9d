"""Every console page renders for a tenant admin."""
import pytest

pytestmark = pytest.mark.django_db

PAGES = ["", "subjects/?q=Acme", "subjects/{subject}/", "queue/", "queue/{task}/", "revocations/",
         "revocations/?extractor=faulty@1", "revocations/{batch}/", "policy/", "webhooks/", "keys/", "audit/",
         "audit.csv"]


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_for_an_admin(world, people, page):
    url = "/console/{slug}/".format(slug=world.slug) + page.format(subject=world.subject, task=world.task.id,
                                                                      batch=world.batch)
    response = people["admin"].get(url)
    assert response.status_code == 200, response.content[:3000]
