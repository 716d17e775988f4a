"""Which image serves each role of the stack: ours unless a variable names one (no Docker)."""

from dev.stack.images import EGRESS_IMAGE, EXECD_IMAGE, SANDBOX_IMAGE, chosen_images


def test_with_nothing_named_every_role_is_served_by_our_image():
    choice = chosen_images({})
    assert choice.images == {"sandbox": SANDBOX_IMAGE, "execd": EXECD_IMAGE, "egress": EGRESS_IMAGE}
    assert not any(choice.is_named(role) for role in ("sandbox", "execd", "egress"))


def test_a_named_image_serves_its_role_alone_and_blank_names_nothing():
    choice = chosen_images({"EXECD_IMAGE": " opensandbox/execd:v1.0.18 ", "EGRESS_IMAGE": "  "})
    assert choice.image("execd") == "opensandbox/execd:v1.0.18"
    assert choice.is_named("execd")
    assert (choice.image("egress"), choice.is_named("egress")) == (EGRESS_IMAGE, False)
    assert (choice.image("sandbox"), choice.is_named("sandbox")) == (SANDBOX_IMAGE, False)
