package fleet
