def test_one():
    assert True


def test_two():
    assert True
