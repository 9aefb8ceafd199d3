"""Tests whose results cover what Django's runner prints at --verbosity 2."""

import sys
import unittest

from django.core.management import call_command
from django.test import SimpleTestCase, TestCase

from .models import Item


class ItemTests(TestCase):
    def test_create(self):
        Item.objects.create(name="pen", price=2)
        self.assertEqual(Item.objects.count(), 1)

    def test_price_default(self):
        self.assertEqual(Item(name="cup").price, 0)

    def test_wrong_total(self):
        self.assertEqual(Item(name="cup", price=3).price * 2, 7)

    def test_raises(self):
        Item.objects.get(name="absent")

    def test_documented(self):
        """A docstring's first line replaces the test's name at verbosity 2."""
        self.assertTrue(True)

    @unittest.skip("needs a payment provider")
    def test_skipped(self):
        pass

    @unittest.skipUnless(sys.platform == "win32", "Windows only")
    def test_skip_unless(self):
        pass

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_unexpected_success(self):
        self.assertEqual(1, 1)

    def test_prints_during_the_test(self):
        print("output the code under test printed")
        self.assertTrue(True)

    def test_prints_then_fails(self):
        print("ok, starting")
        self.assertEqual(1, 2)

    def test_system_check(self):
        call_command("check")

    def test_subtests(self):
        for price in (1, 2, 3):
            with self.subTest(price=price):
                self.assertNotEqual(price, 2)


class SameDocstringTests(SimpleTestCase):
    def test_first(self):
        """Regression test for #1."""
        self.assertTrue(False)

    def test_second(self):
        """Regression test for #1."""
        self.assertTrue(True)


class ViewTests(SimpleTestCase):
    def test_ok_view(self):
        self.assertEqual(self.client.get("/ok/").status_code, 200)

    def test_broken_view_is_a_server_error(self):
        self.client.raise_request_exception = False
        self.assertEqual(self.client.get("/broken/").status_code, 500)


class BrokenSetUpClassTests(SimpleTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        raise RuntimeError("fixture server unavailable")

    def test_never_runs(self):
        pass
